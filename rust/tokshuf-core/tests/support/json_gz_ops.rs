//! Token ids built from operations, for the `.json.gz` round-trip proptest and fuzz target.

/// Ids from a list of operations: an id of any size, a table-sized id, one of a few ids, or a copy
/// of `len` earlier ids from `back` ids before (long repeats at any distance, which random ids
/// lack).
pub fn ids_from_ops(ops: &[(u8, u32)]) -> Vec<u32> {
    let mut ids: Vec<u32> = Vec::new();
    for &(kind, v) in ops {
        match kind % 4 {
            0 => ids.push(v),
            1 => ids.push(v % 300_000),
            2 => ids.push(v % 8),
            _ => {
                let (back, len) = ((v & 0xffff) as usize + 1, (v >> 16) as usize % 4096);
                if back <= ids.len() {
                    let from = ids.len() - back;
                    for k in 0..len {
                        ids.push(ids[from + k]);
                    }
                }
            }
        }
    }
    ids
}
