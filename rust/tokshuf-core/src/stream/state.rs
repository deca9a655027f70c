//! A worker's state as flat integer tables: the interchange between the core, the binding and
//! the documented checkpoint format (which stores exactly these columns).

use super::substream::{Row, Segment};
use crate::error::{Error, Result};

/// Everything one global worker needs to continue exactly where it stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerState {
    /// `(sub-dataset, logical shard, row)` for every owned shard.
    pub rows: Vec<(u32, u32, Row)>,
    /// Tokens emitted per sub-dataset by this worker's mixer in mix phase `phase`.
    pub mixer: Vec<u64>,
    /// The mix phase the mixer's counters belong to.
    pub phase: u32,
    /// The training step the next batch is for.
    pub step: u64,
    /// Steps between two batches of this worker (its rank's DataLoader workers take turns).
    pub step_stride: u64,
    /// Tokens drawn per sub-dataset in phases this worker has left: `(phase, counters)`.
    pub history: Vec<(u32, Vec<u64>)>,
    /// Random draws made by the shuffle buffer.
    pub rng_counter: u64,
    pub batches: u64,
    /// The shuffle buffer, slot by slot, each line as the segments it is made of.
    pub buffer: Vec<Vec<Segment>>,
}

impl Default for WorkerState {
    fn default() -> Self {
        WorkerState {
            rows: vec![],
            mixer: vec![],
            phase: 0,
            step: 0,
            step_stride: 1,
            history: vec![],
            rng_counter: 0,
            batches: 0,
            buffer: vec![],
        }
    }
}

fn u32_of(v: u64, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::invalid(format!("{what} {v} does not fit 32 bits")))
}

impl WorkerState {
    /// The row table, row-major (`rows × 7`): `sub, shard, epoch, pos, offset, tokens, docs`.
    pub fn row_words(&self) -> Vec<u64> {
        self.rows
            .iter()
            .flat_map(|&(sub, shard, r)| [sub.into(), shard.into(), r.epoch, r.pos, r.offset, r.tokens, r.docs])
            .collect()
    }

    /// The buffer table, row-major (`segments × 7`: `slot, sub, shard, epoch, doc, start, len`),
    /// slots in order.
    pub fn buffer_words(&self) -> Vec<u64> {
        let segments = self.buffer.iter().enumerate().flat_map(|(slot, line)| line.iter().map(move |s| (slot, s)));
        segments
            .flat_map(|(slot, s)| [slot as u64, s.sub.into(), s.shard.into(), s.epoch, s.doc, s.start, s.len])
            .collect()
    }

    /// The history table, row-major (`phases left × (1 + sub-datasets)`: phase, counters).
    pub fn history_words(&self) -> Vec<u64> {
        self.history.iter().flat_map(|(p, c)| std::iter::once(u64::from(*p)).chain(c.iter().copied())).collect()
    }

    /// Parse a history table of `1 + n_sub` columns.
    pub fn history_from_words(words: &[u64], n_sub: usize) -> Result<Vec<(u32, Vec<u64>)>> {
        if !words.len().is_multiple_of(n_sub + 1) {
            return Err(Error::invalid(format!("the mix history table must have {} columns", n_sub + 1)));
        }
        words.chunks_exact(n_sub + 1).map(|c| Ok((u32_of(c[0], "mix phase")?, c[1..].to_vec()))).collect()
    }

    /// Parse the two tables (the inverse of [`Self::row_words`] and [`Self::buffer_words`]).
    pub fn from_words(rows: &[u64], buffer: &[u64], mixer: Vec<u64>, rng_counter: u64, batches: u64) -> Result<Self> {
        if !rows.len().is_multiple_of(7) || !buffer.len().is_multiple_of(7) {
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
        Ok(WorkerState { rows, mixer, rng_counter, batches, buffer: lines, ..WorkerState::default() })
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
            history: vec![(0, vec![4, 5])],
            ..WorkerState::default()
        };
        let mut back = WorkerState::from_words(&st.row_words(), &st.buffer_words(), vec![9, 8], 7, 6).unwrap();
        back.history = WorkerState::history_from_words(&st.history_words(), 2).unwrap();
        assert_eq!(back, st);
        assert!(WorkerState::history_from_words(&[1, 2], 2).is_err());
        assert!(WorkerState::from_words(&[], &[1, 0, 0, 0, 0, 0, 1], vec![], 0, 0).is_err());
    }
}
