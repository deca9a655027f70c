//! Turning the byte ranges one batch needs into few requests: ranges that touch or nearly touch
//! are fetched as one block, as long as the bytes fetched and not needed stay under a tenth of
//! the block's needed bytes. A batch of random samples then costs at most 1.1 bytes fetched per
//! byte used, and the pieces of one sample (consecutive documents of the `.bin`) one request.

use std::ops::Range;

/// Bytes fetched and not needed, at most `1 / WASTE_RATIO` of the needed bytes of a block.
const WASTE_RATIO: u64 = 10;

/// One request: the range it fetches and the indices of the input ranges inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub range: Range<u64>,
    pub members: Vec<usize>,
}

/// Blocks covering every non-empty range of `ranges` (each input index is in exactly one
/// block's members; empty ranges are in none), in increasing order of offset. A block grows
/// past `max_block` bytes only by ranges that overlap it (they add no request).
pub(crate) fn coalesce(ranges: &[Range<u64>], max_block: u64) -> Vec<Block> {
    let mut order: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].start < ranges[i].end).collect();
    order.sort_by_key(|&i| (ranges[i].start, ranges[i].end));
    let mut blocks: Vec<Block> = Vec::new();
    // Bytes of the current block that some range needs (the union of its members).
    let mut needed = 0u64;
    for i in order {
        let r = &ranges[i];
        if let Some(b) = blocks.last_mut() {
            let end = b.range.end.max(r.end);
            let new_needed = needed + r.end.saturating_sub(b.range.end.max(r.start));
            let waste = (end - b.range.start) - new_needed;
            let overlaps = r.start < b.range.end;
            let fits = end - b.range.start <= max_block && waste * WASTE_RATIO <= new_needed;
            if overlaps || fits {
                b.range.end = end;
                b.members.push(i);
                needed = new_needed;
                continue;
            }
        }
        needed = r.end - r.start;
        blocks.push(Block { range: r.clone(), members: vec![i] });
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        let block = |range: Range<u64>, members: Vec<usize>| Block { range, members };
        let cases = [
            // Adjacent ranges are one block.
            (vec![20..30, 0..10, 10..20], 1 << 20, vec![block(0..30, vec![1, 2, 0])]),
            // Far ranges stay apart and empty ones are dropped.
            (vec![0..100, 5..5, 1000..1100], 1 << 20, vec![block(0..100, vec![0]), block(1000..1100, vec![2])]),
            // A small gap is bridged: 10 bytes of gap for 200 needed, 5% waste.
            (vec![0..100, 110..210], 1 << 20, vec![block(0..210, vec![0, 1])]),
            // Blocks stop at `max_block` unless the ranges overlap.
            (vec![0..60, 60..120, 100..200], 100, vec![block(0..60, vec![0]), block(60..200, vec![1, 2])]),
        ];
        for (ranges, max_block, want) in cases {
            assert_eq!(coalesce(&ranges, max_block), want, "{ranges:?}");
        }
    }

    proptest! {
        #[test]
        fn blocks_cover_every_range_once_with_little_waste(
            ranges in proptest::collection::vec((0u64..10_000, 0u64..500), 0..60),
            max_block in 1u64..4_000,
        ) {
            let ranges: Vec<Range<u64>> = ranges.into_iter().map(|(s, n)| s..s + n).collect();
            let blocks = coalesce(&ranges, max_block);
            let mut seen = vec![0u32; ranges.len()];
            let mut fetched = 0u64;
            let mut prev_end = 0u64;
            for b in &blocks {
                prop_assert!(b.range.start >= prev_end, "blocks overlap or are out of order");
                prev_end = b.range.end;
                fetched += b.range.end - b.range.start;
                for &m in &b.members {
                    seen[m] += 1;
                    prop_assert!(b.range.start <= ranges[m].start && ranges[m].end <= b.range.end);
                }
            }
            for (i, r) in ranges.iter().enumerate() {
                prop_assert_eq!(seen[i], u32::from(r.start < r.end), "range {} seen {} times", i, seen[i]);
            }
            // The union of the ranges, computed without the blocks.
            let mut bytes = vec![false; 10_600];
            for r in &ranges {
                bytes[r.start as usize..r.end as usize].iter_mut().for_each(|b| *b = true);
            }
            let needed = bytes.iter().filter(|&&b| b).count() as u64;
            prop_assert!(fetched * WASTE_RATIO <= needed * (WASTE_RATIO + 1), "fetched {} for {} needed", fetched, needed);
        }
    }
}
