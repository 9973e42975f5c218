package cluster

import (
	"os"
	"testing"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	natstest.RemoveBinary() // the standalone nats-server a test built
	os.Exit(code)
}
