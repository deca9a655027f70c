//! Dolma's per-document metadata next to a token file: `<stem>.csv.gz`, one `start,end,id,src,loc`
//! row per document (token offsets, `end` exclusive, no header). OLMo-core reads the first two
//! columns; so do we.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::error::{Error, IoContext, Result};
use crate::fsutil::record::{Sum, Summing};
use crate::fsutil::TempFile;

/// The `(start, end)` of every row, checked against a token file of `num_tokens` tokens.
pub fn read_metadata(path: &Path, num_tokens: u64) -> Result<Vec<[u64; 2]>> {
    let file = File::open(path).with_path(path)?;
    parse_metadata(BufReader::new(MultiGzDecoder::new(BufReader::new(file))), path, num_tokens)
}

/// Parse decompressed metadata rows (`path` is for messages).
pub fn parse_metadata(reader: impl BufRead, path: &Path, num_tokens: u64) -> Result<Vec<[u64; 2]>> {
    let mut spans = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| Error::format(path, format!("line {}: {e}", i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let mut cols = line.split(',');
        let mut field = |name: &str| -> Result<u64> {
            let v = cols.next().unwrap_or("").trim();
            v.parse::<u64>().map_err(|_| {
                Error::format(path, format!("line {}: {name} {v:?} is not a token offset (row: {line:?})", i + 1))
            })
        };
        let (start, end) = (field("start")?, field("end")?);
        if start > end || end > num_tokens {
            return Err(Error::format(
                path,
                format!(
                    "line {}: document {start}..{end} does not lie within the token file's {num_tokens} tokens",
                    i + 1
                ),
            ));
        }
        spans.push([start, end]);
    }
    Ok(spans)
}

/// Write `spans` as Dolma metadata (`start,end,id,src,loc`; `id` and `loc` are the row number),
/// atomically.
pub fn write_metadata(path: &Path, spans: &[[u64; 2]], src: &str) -> Result<()> {
    write_metadata_staged(path, spans, src)?.0.commit()
}

/// [`write_metadata`], left under a temporary name (to commit with the token file); its size
/// and checksum.
pub fn write_metadata_staged(path: &Path, spans: &[[u64; 2]], src: &str) -> Result<(TempFile, Sum)> {
    let tmp = TempFile::new(path);
    let file = tmp.create()?;
    let mut gz = GzEncoder::new(BufWriter::new(Summing::new(file)), Compression::fast());
    let src = src.replace([',', '\n'], "_");
    for (i, [s, e]) in spans.iter().enumerate() {
        writeln!(gz, "{s},{e},{i},{src},{i}").with_path(tmp.path())?;
    }
    let summing = gz.finish().with_path(tmp.path())?.into_inner().map_err(|e| Error::io(tmp.path(), e.into_error()))?;
    let (file, sum) = summing.into_parts();
    crate::fsutil::fault::point().with_path(tmp.path())?;
    file.sync_all().with_path(tmp.path())?;
    drop(file);
    Ok((tmp, sum))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_bytes_parse_or_fail_cleanly(data in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(spans) = parse_metadata(&data[..], Path::new("x"), 1000) {
                prop_assert!(spans.iter().all(|[s, e]| s <= e && *e <= 1000));
            }
        }

        #[test]
        fn rows_round_trip(rows in prop::collection::vec((0u64..500, 0u64..500), 0..20)) {
            let text: String = rows.iter().map(|(a, b)| format!("{},{},x,y,1\n", a.min(b), a.max(b))).collect();
            let spans = parse_metadata(text.as_bytes(), Path::new("x"), 500).unwrap();
            prop_assert_eq!(spans, rows.iter().map(|(a, b)| [*a.min(b), *a.max(b)]).collect::<Vec<_>>());
        }
    }

    #[test]
    fn round_trip_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("part-0.csv.gz");
        let spans = vec![[0, 3], [3, 10], [12, 12]];
        write_metadata(&p, &spans, "src,x").unwrap();
        assert_eq!(read_metadata(&p, 12).unwrap(), spans);
        let err = read_metadata(&p, 11).unwrap_err().to_string();
        assert!(err.contains("11 tokens"), "{err}");
    }
}
