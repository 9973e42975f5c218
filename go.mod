module github.com/fanoutd/fanoutd

go 1.26

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/shopspring/decimal v1.6.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
