//! Jobs cut into tasks for a scheduler (Slurm arrays, Ray, anything that runs commands): task `i`
//! of `n` reads a contiguous slice of the input listing, balanced by bytes, so that the tasks'
//! outputs, put together in task order, are the one-node run's.

use std::ops::Range;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Task `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub index: usize,
    pub count: usize,
}

impl Task {
    /// Task `index` of `count`, checked.
    pub fn new(index: usize, count: usize) -> Result<Task> {
        if count == 0 || index >= count {
            return Err(Error::invalid(format!(
                "task {index}/{count}: the task index must be in 0..{count} and the count at least 1"
            )));
        }
        Ok(Task { index, count })
    }

    /// The task of this Slurm array job: `SLURM_ARRAY_TASK_ID` counted from
    /// `SLURM_ARRAY_TASK_MIN`, of `SLURM_ARRAY_TASK_COUNT`.
    pub fn from_slurm() -> Result<Task> {
        let var = |name: &str| -> Result<Option<usize>> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| Error::invalid(format!("{name}={v:?} is not a non-negative integer"))),
                Err(_) => Ok(None),
            }
        };
        let (Some(id), Some(count)) = (var("SLURM_ARRAY_TASK_ID")?, var("SLURM_ARRAY_TASK_COUNT")?) else {
            return Err(Error::invalid(
                "`auto` takes the task from a Slurm array job (SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT), \
                 which this process is not part of; give the task as i/N",
            ));
        };
        let min = var("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let index = id
            .checked_sub(min)
            .ok_or_else(|| Error::invalid(format!("SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}")))?;
        Task::new(index, count)
    }

    /// `part-00003-of-00008`: the name of this task's part of an output.
    pub fn part_name(&self) -> String {
        format!("part-{:05}-of-{:05}", self.index, self.count)
    }

    /// The inputs of this task among inputs of `sizes` bytes: input `j` belongs to the task
    /// whose share of the total bytes holds the input's middle byte (by count when all are
    /// empty). Tasks get contiguous, possibly empty, slices that cover every input once, in order.
    pub fn slice(&self, sizes: &[u64]) -> Range<usize> {
        let owner = owners(sizes, self.count);
        let start = owner.iter().position(|&t| t >= self.index).unwrap_or(sizes.len());
        let end = owner.iter().position(|&t| t > self.index).unwrap_or(sizes.len());
        start..end
    }
}

impl FromStr for Task {
    type Err = Error;

    /// `i/N` (0-based `i`), or `auto` for the task of a Slurm array job.
    fn from_str(s: &str) -> Result<Task> {
        if s == "auto" {
            return Task::from_slurm();
        }
        let parsed = s.split_once('/').and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        let Some((index, count)) = parsed else {
            return Err(Error::invalid(format!("{s:?} is not a task: give i/N (0-based i, e.g. 3/8) or auto")));
        };
        Task::new(index, count)
    }
}

/// The task of each input (non-decreasing).
fn owners(sizes: &[u64], count: usize) -> Vec<usize> {
    let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
    let n = count as u128;
    let mut before = 0u128;
    sizes
        .iter()
        .enumerate()
        .map(|(j, &size)| {
            let owner = if total == 0 {
                j as u128 * n / sizes.len() as u128
            } else {
                // The middle of input j, 2x to stay in integers: (2*before + size) / (2*total).
                (2 * before + u128::from(size)) * n / (2 * total)
            };
            before += u128::from(size);
            owner.min(n - 1) as usize
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_names() {
        let t: Task = "3/8".parse().unwrap();
        assert_eq!((t.index, t.count, t.part_name().as_str()), (3, 8, "part-00003-of-00008"));
        for bad in ["8/8", "1/0", "x", "1-2", "-1/3"] {
            assert!(bad.parse::<Task>().is_err(), "{bad}");
        }
    }

    #[test]
    fn balanced_by_bytes() {
        // 305 bytes in thirds of 101.7: the middles of the inputs fall at 50, 100.5, 101.5 |
        // 102.5, 153 | 203.5, 204.5, 255: 102, 101 and 102 bytes per task.
        let sizes = [100, 1, 1, 1, 100, 1, 1, 100];
        let slices: Vec<_> = (0..3).map(|i| Task::new(i, 3).unwrap().slice(&sizes)).collect();
        assert_eq!(slices, [0..3, 3..5, 5..8]);
    }

    proptest! {
        #[test]
        fn slices_cover_every_input_once_in_order(
            sizes in proptest::collection::vec(prop_oneof![Just(0u64), 0u64..1000, 0u64..u64::MAX / 4096], 0..40),
            count in 1usize..12,
        ) {
            let mut next = 0;
            for index in 0..count {
                let r = Task::new(index, count).unwrap().slice(&sizes);
                prop_assert_eq!(r.start, next);
                prop_assert!(r.end >= r.start);
                next = r.end;
            }
            prop_assert_eq!(next, sizes.len());
            // With one task per input or fewer and all inputs equal, no task is left empty.
            if !sizes.is_empty() && count <= sizes.len() && sizes.iter().all(|&s| s == sizes[0]) {
                for index in 0..count {
                    prop_assert!(!Task::new(index, count).unwrap().slice(&sizes).is_empty());
                }
            }
        }
    }
}
