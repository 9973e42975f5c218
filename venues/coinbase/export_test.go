package coinbase

// Expect records a subscribe request as the adapter does before sending it.
func Expect(d *Decoder, channel string, products ...string) {
	d.expect(request{channel: channel, products: products})
}
