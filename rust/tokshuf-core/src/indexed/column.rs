//! The `.idx` arrays of a dataset being written, kept on disk while it grows.
//!
//! Megatron's format puts the arrays after the header, so they are known only at the end. Held
//! in memory they cost 4 bytes a sequence and 8 a document (12 a document in a `preprocess`:
//! 24 GB for two billion documents), and the RSS of a `preprocess` would grow with its input.
//! A [`Column`] keeps its last chunk in memory and the rest in an unnamed temporary file beside
//! the output (deleted by the OS when closed, even after a crash), which the writer reads back
//! once to write the `.idx`.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::PathBuf;

/// Bytes of a column held in memory, and of every read and write of a spill file: a multiple
/// of every element size.
pub(super) const CHUNK: usize = 1 << 20;

/// A fixed-size value of an `.idx` array, stored little-endian.
pub(super) trait Elem: Copy {
    const SIZE: usize;
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
elem!(i8, i32, u64);

/// The little-endian bytes of an array, visited chunk by chunk; every chunk holds whole elements.
pub(super) trait LeChunks {
    fn each(&mut self, f: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()>;
}

impl<T: Elem> LeChunks for &[T] {
    fn each(&mut self, f: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let mut buf = Vec::with_capacity(CHUNK.min(self.len() * T::SIZE));
        for part in self.chunks(CHUNK / T::SIZE) {
            buf.clear();
            part.iter().for_each(|&v| v.put(&mut buf));
            f(&buf)?;
        }
        Ok(())
    }
}

/// An append-only array whose values before the last chunk wait in a temporary file.
#[derive(Debug)]
pub(super) struct Column<T> {
    /// The newest values, fewer than `CHUNK` bytes of them between pushes.
    tail: Vec<u8>,
    /// The older values, created at the first spill.
    spill: Option<File>,
    /// Bytes in `spill`.
    spilled: u64,
    /// Where the spill file goes: the output's directory (a filesystem with room for the output).
    dir: PathBuf,
    _elem: PhantomData<T>,
}

impl<T: Elem> Column<T> {
    pub(super) fn new(dir: PathBuf) -> Self {
        Column { tail: Vec::new(), spill: None, spilled: 0, dir, _elem: PhantomData }
    }

    pub(super) fn len(&self) -> u64 {
        (self.spilled + self.tail.len() as u64) / T::SIZE as u64
    }

    #[inline]
    pub(super) fn push(&mut self, v: T) -> io::Result<()> {
        v.put(&mut self.tail);
        if self.tail.len() >= CHUNK {
            self.flush_tail()?;
        }
        Ok(())
    }

    fn flush_tail(&mut self) -> io::Result<()> {
        let file = match &mut self.spill {
            Some(f) => f,
            None => self.spill.insert(tempfile::tempfile_in(&self.dir)?),
        };
        // At the end whatever an earlier visit did (see `each`).
        file.seek(SeekFrom::Start(self.spilled))?;
        file.write_all(&self.tail)?;
        self.spilled += self.tail.len() as u64;
        self.tail.clear();
        Ok(())
    }
}

impl<T: Elem> LeChunks for Column<T> {
    fn each(&mut self, f: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        if let Some(file) = &mut self.spill {
            file.seek(SeekFrom::Start(0))?;
            let mut buf = vec![0u8; CHUNK];
            let mut left = self.spilled;
            while left > 0 {
                let n = left.min(CHUNK as u64) as usize;
                file.read_exact(&mut buf[..n])?;
                f(&buf[..n])?;
                left -= n as u64;
            }
        }
        f(&self.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(c: &mut dyn LeChunks) -> Vec<u8> {
        let mut out = Vec::new();
        c.each(&mut |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn a_column_reads_back_what_was_pushed_across_spills_and_visits() {
        let dir = tempfile::tempdir().unwrap();
        let mut col = Column::<u64>::new(dir.path().to_path_buf());
        let n = 3 * CHUNK as u64 / 8 + 5;
        let mut want = Vec::new();
        for v in 0..n {
            col.push(v * 7).unwrap();
            want.push(v * 7);
            if v == n / 2 {
                // A visit in the middle does not disturb later pushes.
                assert_eq!(bytes(&mut col), bytes(&mut want.as_slice()));
            }
        }
        assert_eq!(col.len(), n);
        assert!(col.spill.is_some() && col.tail.len() < CHUNK);
        let got = bytes(&mut col);
        assert!(got == bytes(&mut want.as_slice()), "the {} bytes differ from the pushed values'", got.len());
        assert_eq!(bytes(&mut col), got, "a second visit reads the same");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the spill file has no name");
    }

    #[test]
    fn slices_and_columns_give_the_same_little_endian_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<i32> = (0..(CHUNK as i32 / 2)).map(|i| i.wrapping_mul(-7919)).collect();
        let mut col = Column::<i32>::new(dir.path().to_path_buf());
        values.iter().for_each(|&v| col.push(v).unwrap());
        let want: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(bytes(&mut col), want);
        assert_eq!(bytes(&mut values.as_slice()), want);
        assert!(bytes(&mut (&[] as &[i8])).is_empty());
    }
}
