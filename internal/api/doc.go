// Package api is the HTTP contract every route of the daemon shares: bearer
// tokens and their scopes (Token, Auth), and one error vocabulary (Code) with
// one body shape (WriteError), used alike by the websocket upgrade, the
// websocket error replies, the daemon's /v1 routes and the claim gateway.
package api
