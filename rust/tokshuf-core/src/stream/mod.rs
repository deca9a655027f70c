//! The stateful, distributed, rescalable streaming loader (Bamba's design, rebuilt).
//!
//! Read → order → emit:
//! * [`source`]: documents of a sub-dataset by global index ([`IndexedSource`], [`NpySource`],
//!   or a handler written in Python);
//! * [`partition`]: documents → logical shards → global workers, exact integer blocks;
//! * [`permute`]: a keyed O(1)-memory permutation per (seed, sub-dataset, shard, epoch);
//! * [`chunk`]: `[bos] + document + [eos]`, cut into chunks; ends are structural;
//! * [`substream`]: a worker's shards of one sub-dataset, one [`Row`] of state per shard;
//! * [`mixer`]: token-exact weighted mixing, within one chunk of the target at every chunk;
//! * [`worker`]: packing into lines, the shuffle buffer, batches;
//! * [`state`]: a worker's state as flat tables (the checkpoint's columns).

pub mod chunk;
pub mod config;
pub mod mixer;
pub mod partition;
pub mod permute;
pub mod source;
pub mod source_indexed;
pub mod source_npy;
pub mod state;
pub mod substream;
pub mod worker;

#[cfg(test)]
mod tests;

pub use config::{MixPhase, StreamConfig};
pub use source::{DocSource, VecSource};
pub use source_indexed::IndexedSource;
pub use source_npy::{parse_width, NpySource};
pub use state::WorkerState;
pub use substream::{Row, Segment};
pub use worker::{Line, Placed, TokenOut, WorkerStream};
