//! A worker's state as flat integer tables: the interchange between the core, the binding and
//! the documented checkpoint format (which stores exactly these columns).

use super::substream::{Row, Segment};
use crate::error::{Error, Result};

/// Columns of a row table: `sub, shard, epoch, pos, offset, tokens, docs`.
pub const ROW_COLUMNS: [&str; 7] = ["sub", "shard", "epoch", "pos", "offset", "tokens", "docs"];
/// Columns of a buffer table: `slot, sub, shard, epoch, doc, start, len`.
pub const SEGMENT_COLUMNS: [&str; 7] = ["slot", "sub", "shard", "epoch", "doc", "start", "len"];

/// Everything one global worker needs to continue exactly where it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerState {
    /// `(sub-dataset, logical shard, row)` for every owned shard.
    pub rows: Vec<(u32, u32, Row)>,
    /// Tokens emitted per sub-dataset by this worker's mixer.
    pub mixer: Vec<u64>,
    /// Random draws made by the shuffle buffer.
    pub rng_counter: u64,
    /// Batches produced.
    pub batches: u64,
    /// The shuffle buffer, slot by slot, each line as the segments it is made of.
    pub buffer: Vec<Vec<Segment>>,
}

fn u32_of(v: u64, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::invalid(format!("{what} {v} does not fit 32 bits")))
}

impl WorkerState {
    /// The row table, row-major (`rows × 7`).
    pub fn row_words(&self) -> Vec<u64> {
        self.rows
            .iter()
            .flat_map(|&(sub, shard, r)| [sub.into(), shard.into(), r.epoch, r.pos, r.offset, r.tokens, r.docs])
            .collect()
    }

    /// The buffer table, row-major (`segments × 7`), slots in order.
    pub fn buffer_words(&self) -> Vec<u64> {
        let mut out = vec![];
        for (slot, line) in self.buffer.iter().enumerate() {
            for s in line {
                out.extend([slot as u64, s.sub.into(), s.shard.into(), s.epoch, s.doc, s.start, s.len]);
            }
        }
        out
    }

    /// Parse the two tables (the inverse of [`Self::row_words`] and [`Self::buffer_words`]).
    pub fn from_words(rows: &[u64], buffer: &[u64], mixer: Vec<u64>, rng_counter: u64, batches: u64) -> Result<Self> {
        if rows.len() % 7 != 0 || buffer.len() % 7 != 0 {
            return Err(Error::invalid("state tables must have 7 columns".to_string()));
        }
        let rows = rows
            .chunks_exact(7)
            .map(|c| {
                let row = Row { epoch: c[2], pos: c[3], offset: c[4], tokens: c[5], docs: c[6] };
                Ok((u32_of(c[0], "sub-dataset")?, u32_of(c[1], "logical shard")?, row))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut lines: Vec<Vec<Segment>> = vec![];
        for c in buffer.chunks_exact(7) {
            let slot = c[0] as usize;
            if slot == lines.len() {
                lines.push(vec![]);
            } else if slot + 1 != lines.len() {
                return Err(Error::invalid(format!(
                    "buffer slots must be listed in order from 0; found slot {slot} after {} lines",
                    lines.len()
                )));
            }
            let seg = Segment {
                sub: u32_of(c[1], "sub-dataset")?,
                shard: u32_of(c[2], "logical shard")?,
                epoch: c[3],
                doc: c[4],
                start: c[5],
                len: c[6],
            };
            lines.last_mut().expect("pushed").push(seg);
        }
        Ok(WorkerState { rows, mixer, rng_counter, batches, buffer: lines })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_round_trip() {
        let seg = |doc| Segment { sub: 1, shard: 2, epoch: 3, doc, start: 4, len: 5 };
        let st = WorkerState {
            rows: vec![(0, 5, Row { epoch: 1, pos: 2, offset: 3, tokens: 4, docs: 5 })],
            mixer: vec![9, 8],
            rng_counter: 7,
            batches: 6,
            buffer: vec![vec![seg(1), seg(2)], vec![seg(3)]],
        };
        let back = WorkerState::from_words(&st.row_words(), &st.buffer_words(), vec![9, 8], 7, 6).unwrap();
        assert_eq!(back, st);
        assert!(WorkerState::from_words(&[], &[1, 0, 0, 0, 0, 0, 1], vec![], 0, 0).is_err());
    }
}
