//! `.npy` files for the index cache: written byte-identical to `numpy.save` (format 1.0, header
//! padded to 64 bytes with numpy's growth spaces), written atomically, and read by mapping.

use std::io::Write;
use std::path::Path;

use super::array::{ElemType, IndexArray};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::TempFile;
use crate::indexed::Mapping;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
const ALIGN: usize = 64;
/// numpy leaves room for the first axis to grow to this many digits.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

fn shape_repr(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// The header `numpy.save` writes for a C-ordered array.
pub fn header(elem: ElemType, shape: &[usize]) -> Vec<u8> {
    let mut dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", elem.descr(), shape_repr(shape));
    if let Some(first) = shape.first() {
        dict.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(first.to_string().len())));
    }
    let hlen = dict.len() + 1;
    let pad = ALIGN - (MAGIC.len() + 2 + 2 + hlen) % ALIGN;
    // Magic, version 1.0, header length, the dict padded with spaces, a newline.
    let len = ((hlen + pad) as u16).to_le_bytes();
    [&MAGIC[..], &[1, 0], &len, dict.as_bytes(), &b" ".repeat(pad), b"\n"].concat()
}

/// Write `array` to `path` as `.npy`: temporary file, then rename, so readers see the whole file
/// or none. `durable` also fsyncs before the rename (seconds on a busy disk for a large index;
/// caches of derived data can skip it: a file cut short by a power loss fails [`load`]'s size check).
pub fn save(array: &IndexArray, path: &Path, durable: bool) -> Result<()> {
    let tmp = TempFile::new(path);
    let mut f = std::io::BufWriter::with_capacity(1 << 20, tmp.create()?);
    f.write_all(&header(array.elem(), array.shape())).with_path(tmp.path())?;
    f.write_all(array.bytes()).with_path(tmp.path())?;
    let f = f.into_inner().map_err(|e| Error::io(tmp.path(), e.into_error()))?;
    if durable {
        f.sync_all().with_path(tmp.path())?;
    }
    drop(f);
    tmp.commit()
}

fn dict_value<'a>(dict: &'a str, key: &str) -> Option<&'a str> {
    let at = dict.find(&format!("'{key}':"))? + key.len() + 3;
    Some(dict[at..].trim_start())
}

/// Map a `.npy` written by [`save`] or `numpy.save` (C order, little-endian int16/int32/uint32/int64).
pub fn load(path: &Path) -> Result<IndexArray> {
    let map = Mapping::open(path)?;
    let b = map.bytes();
    let bad = |msg: String| Error::format(path, msg);
    if b.len() < 10 || &b[..6] != MAGIC {
        return Err(bad("not a .npy file (bad magic)".into()));
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => return Err(bad(format!("unsupported .npy version {v}"))),
    };
    let data_at = start + hlen;
    let dict = b
        .get(start..data_at)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| bad("truncated header".into()))?;
    let descr = dict_value(dict, "descr")
        .and_then(|v| v.strip_prefix('\''))
        .and_then(|v| v.split('\'').next())
        .ok_or_else(|| bad("header has no descr".into()))?;
    let elem = ElemType::from_descr(descr)
        .ok_or_else(|| bad(format!("dtype {descr:?} is not an index dtype (int16, int32, uint32, int64)")))?;
    if !dict_value(dict, "fortran_order").is_some_and(|v| v.starts_with("False")) {
        return Err(bad("Fortran-ordered arrays are not supported".into()));
    }
    let shape_txt = dict_value(dict, "shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or_else(|| bad("header has no shape".into()))?;
    let shape = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad(format!("bad shape entry {s:?}"))))
        .collect::<Result<Vec<_>>>()?;
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape overflows".into()))?;
    let need = count.checked_mul(elem.itemsize()).and_then(|n| n.checked_add(data_at));
    if need != Some(b.len()) {
        return Err(bad(format!(
            "size {} does not match its header ({count} × {} elements after {data_at} header bytes): \
             the file is truncated or was modified",
            b.len(),
            elem.name()
        )));
    }
    IndexArray::mapped(map, data_at, elem, shape).ok_or_else(|| bad("data is not aligned for its element type".into()))
}

#[cfg(test)]
mod tests {
    use super::super::array::Owned;
    use super::*;

    #[test]
    fn header_matches_numpy_save() {
        // numpy.save(np.zeros((10604, 2), np.int32)) starts with these 128 bytes.
        let h = header(ElemType::I32, &[10604, 2]);
        assert_eq!(h.len(), 128);
        assert_eq!(&h[..10], b"\x93NUMPY\x01\x00\x76\x00");
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (10604, 2), }    "));
        assert!(text.ends_with(" \n"));
    }

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let a = IndexArray::pairs(Owned::I64(vec![1, 2, 3, -4]));
        save(&a, &p, true).unwrap();
        let b = load(&p).unwrap();
        assert!(b.is_mapped());
        assert_eq!((b.elem(), b.shape()), (ElemType::I64, &[2usize, 2][..]));
        assert_eq!(b.view().to_vec(), [1, 2, 3, -4]);
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("truncated"));
        std::fs::write(&p, b"hello").unwrap();
        assert!(load(&p).is_err());
    }
}
