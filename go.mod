module github.com/fanoutd/fanoutd

go 1.26

require (
	github.com/coder/websocket v1.8.15
	github.com/shopspring/decimal v1.6.0
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require github.com/klauspost/compress v1.20.4
