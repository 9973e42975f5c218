//go:build !linux

package bench

import (
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// epollRead is Linux's; elsewhere the goroutine readers read.
func epollRead([]*websocket.Conn, []latResult, time.Time, func(), *sync.WaitGroup) bool {
	return false
}
