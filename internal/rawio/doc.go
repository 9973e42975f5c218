// Package rawio is the daemon's I/O below net.Conn, in one place: reads
// and writes made as RawSyscalls on a socket's descriptor (ReadConn,
// Socket), an io_uring of sends (Ring), and an epoll Poller that reports
// parked sockets readable. It is a leaf: it imports
// nothing of this module. Why RawSyscall rather than the poller's reads
// and writes is in docs/design.md.
package rawio
