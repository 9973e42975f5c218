// fanoutd's TypeScript/JavaScript client: exact order books over the
// daemon's websocket API, every loss reported, reconnecting on its own.
export { Book, INVALID, Reason, VALID, priceKey } from './book.js';
export { ClosedError, Client, CLOSE_TAKEN_OVER, CLOSE_UNREAD_REPLIES, FanoutdError } from './client.js';
export { Tracker } from './tracker.js';
