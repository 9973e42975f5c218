// Types of the fanoutd client. Prices and sizes are decimal strings (the
// daemon's canonical form: plain notation, no trailing fractional zeros,
// so equal prices are equal strings); never a number.

export type Decimal = string;
export type PriceLevel = [price: Decimal, size: Decimal];

export const VALID: 'valid';
export const INVALID: 'invalid';
export type State = 'valid' | 'invalid';
export const Reason: {
  readonly SUBSCRIBING: 'subscribing';
  readonly GAP: 'gap';
  readonly RESYNC: 'resync';
  readonly DROPPING: 'dropping';
  readonly RECONNECTING: 'reconnecting';
  readonly LINK_DOWN: 'link_down';
  readonly BAD_LEVEL: 'bad_level';
};
export type ReasonValue = '' | (typeof Reason)[keyof typeof Reason];

/** value × 10^18 of a plain non-negative decimal string; throws otherwise. */
export function priceKey(s: Decimal): bigint;

export interface BookSnapshot {
  stream: string;
  seq: number;
  venueSeq: number;
  venueTime?: string;
  recvTime?: string;
  state: State;
  reason: ReasonValue;
  bids: PriceLevel[];
  asks: PriceLevel[];
}

export class Book {
  readonly stream: string;
  readonly seq: number;
  readonly venueSeq: number;
  readonly venueTime?: string;
  readonly recvTime?: string;
  readonly state: State;
  readonly reason: ReasonValue;
  readonly gap?: [first: number, last: number];
  readonly valid: boolean;
  top(n?: number): { bids: PriceLevel[]; asks: PriceLevel[] };
  bbo(): { bid?: PriceLevel; ask?: PriceLevel };
  snapshot(): BookSnapshot;
  changed(): Promise<void>;
}

export interface BookEvent { type: 'book'; stream: string; seq: number; snapshot?: boolean; venue_seq?: number; venue_time?: string; recv_time: string; bids: PriceLevel[]; asks: PriceLevel[] }
export interface Trade { type: 'trade'; stream: string; seq: number; id: string; price: Decimal; size: Decimal; side: 'buy' | 'sell' | ''; venue_time?: string; recv_time: string }
export interface Ticker { type: 'ticker'; stream: string; seq: number; bid: Decimal; bid_size: Decimal; ask: Decimal; ask_size: Decimal; last?: Decimal; venue_time?: string; recv_time: string }
export interface Quote { type: 'quote'; stream: string; seq: number; bid?: Decimal; bid_size?: Decimal; ask?: Decimal; ask_size?: Decimal; venue_time?: string; recv_time: string }
export interface TradeBar { type: 'trade_bar'; stream: string; seq: number; interval_ms: number; start: string; end: string; open: Decimal; high: Decimal; low: Decimal; close: Decimal; volume: Decimal; buy_volume: Decimal; sell_volume: Decimal; trades: number; first_trade_time: string; last_trade_time: string; gap?: boolean }
export interface Notice { type: 'notice'; kind: string; severity: string; venue: string; stream: string; at: string; message: string; details: Record<string, unknown> }
/** A loss: reason 'resumed' | 'stream_gap' | 'hole' | 'restart' (numbering restarted; first = last = 0). */
export interface Gap { type: 'gap'; stream: string; first: number; last: number; reason: 'resumed' | 'stream_gap' | 'hole' | 'restart' }
export interface BookStateChange { type: 'book_state'; stream: string; state: State; reason: ReasonValue; seq: number; gap?: [number, number] }
export interface Connected { type: 'connected'; url: string; attempt: number }
export interface Disconnected { type: 'disconnected'; url: string; error?: Error }
export type Message = BookEvent | Trade | Ticker | Quote | TradeBar | Notice | Gap | BookStateChange | Connected | Disconnected;

export const CLOSE_TAKEN_OVER: 4001;
export const CLOSE_UNREAD_REPLIES: 4002;

export class FanoutdError extends Error {
  readonly code: string;
  readonly id?: string;
  readonly httpStatus?: number;
  closeCode?: number;
  readonly fatal: boolean;
}
export class ClosedError extends Error {
  readonly code: number;
  readonly reason: string;
}

export interface ClientOptions {
  urls: string | string[];
  token?: string;
  name?: string;
  onMessage?: (m: Message) => void | Promise<void>;
  /** ms; defaults to 100 */
  minBackoff?: number;
  /** ms; defaults to 10000 */
  maxBackoff?: number;
}

export interface OrderBook {
  bids: PriceLevel[];
  asks: PriceLevel[];
  symbol: string;
  stream: string;
  timestamp?: number;
  datetime?: string;
  nonce: number;
}

export class Client {
  constructor(o: ClientOptions);
  readonly error?: Error;
  readonly done: boolean;
  start(): Promise<void>;
  run(): Promise<void>;
  close(): Promise<void>;
  waitClosed(): Promise<Error | undefined>;
  reconnect(): void;
  book(stream: string): Book | undefined;
  subscribe(...streams: string[]): Promise<void>;
  unsubscribe(...streams: string[]): Promise<void>;
  watchOrderBook(stream: string, limit?: number): Promise<OrderBook>;
}

export class Tracker {}
