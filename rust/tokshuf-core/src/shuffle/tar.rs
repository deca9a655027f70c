//! The few parts of the tar format the shuffle needs.
//!
//! Writing: POSIX ustar members with fixed metadata (mode 0644, uid/gid 0, mtime 0, no user or
//! group names), so an archive is a pure function of its members. Reading (for
//! `--shuffle-only`): ustar and GNU headers, GNU long names and pax `path`/`size` records.

use std::io::{self, Read, Write};

/// Tar block size.
pub const BLOCK: usize = 512;

fn octal(field: &mut [u8], value: u64) {
    // `width - 1` octal digits and a NUL, the form every reader accepts.
    let digits = field.len() - 1;
    let s = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(s.as_bytes());
    field[digits] = 0;
}

/// The 512-byte ustar header of a regular file. `name` must be at most 100 bytes.
pub fn header(name: &str, size: u64) -> [u8; BLOCK] {
    assert!(name.len() <= 100, "tar member name longer than 100 bytes: {name}");
    assert!(size < 1 << 33, "tar member of 8 GiB or more");
    let mut h = [0u8; BLOCK];
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], 0o644);
    octal(&mut h[124..136], size);
    // uid, gid, mtime, device major and minor.
    for field in [108..116, 116..124, 136..148, 329..337, 337..345] {
        octal(&mut h[field], 0);
    }
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].fill(b' ');
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    h
}

/// Bytes of zero padding after `size` bytes of member data.
pub fn padding(size: u64) -> usize {
    (BLOCK - (size as usize % BLOCK)) % BLOCK
}

/// Write one member (header, data, padding).
pub fn write_member<W: Write>(w: &mut W, name: &str, data: &[u8]) -> io::Result<()> {
    w.write_all(&header(name, data.len() as u64))?;
    w.write_all(data)?;
    w.write_all(&[0u8; BLOCK][..padding(data.len() as u64)])
}

/// The end-of-archive marker: two zero blocks.
pub fn write_end<W: Write>(w: &mut W) -> io::Result<()> {
    w.write_all(&[0u8; 2 * BLOCK])
}

fn parse_number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|&b| b & 0x80 != 0) {
        // GNU base-256.
        return Some(field[1..].iter().fold(0u64, |v, &b| (v << 8) | u64::from(b)));
    }
    let s = std::str::from_utf8(field).ok()?;
    let s = s.trim_matches(|c: char| c == '\0' || c == ' ');
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads the regular-file members of a tar stream in order.
pub struct TarReader<R> {
    inner: R,
    done: bool,
}

impl<R: Read> TarReader<R> {
    /// A reader over `inner`.
    pub fn new(inner: R) -> Self {
        Self { inner, done: false }
    }

    fn read_data(&mut self, size: u64) -> io::Result<Vec<u8>> {
        // Grow with the data actually read: a corrupt size field must not allocate gigabytes.
        let mut data = Vec::with_capacity(size.min(1 << 20) as usize);
        (&mut self.inner).take(size).read_to_end(&mut data)?;
        if data.len() as u64 != size {
            return Err(bad(format!("truncated member data ({} of {size} bytes)", data.len())));
        }
        let mut pad = [0u8; BLOCK];
        self.inner.read_exact(&mut pad[..padding(size)]).map_err(|e| bad(format!("truncated padding ({e})")))?;
        Ok(data)
    }

    /// The next regular file as (name, bytes), or `None` at the end of the archive.
    pub fn next_member(&mut self) -> io::Result<Option<(String, Vec<u8>)>> {
        let mut long_name: Option<String> = None;
        let mut pax_size: Option<u64> = None;
        while !self.done {
            let mut h = [0u8; BLOCK];
            let mut got = 0;
            while got < BLOCK {
                match self.inner.read(&mut h[got..])? {
                    0 if got == 0 => {
                        self.done = true;
                        return Ok(None);
                    }
                    0 => return Err(bad("truncated tar header")),
                    n => got += n,
                }
            }
            if h.iter().all(|&b| b == 0) {
                self.done = true;
                return Ok(None);
            }
            let stored: u64 = parse_number(&h[148..156]).ok_or_else(|| bad("bad header checksum field"))?;
            let sum: u64 =
                h.iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { 32 } else { u64::from(b) }).sum();
            if stored != sum {
                return Err(bad("tar header checksum mismatch (not a tar file, or corrupt)"));
            }
            let size = parse_number(&h[124..136]).ok_or_else(|| bad("bad size field"))?;
            let size = pax_size.take().unwrap_or(size);
            match h[156] {
                b'L' => long_name = Some(cstr(&self.read_data(size)?)),
                b'x' => {
                    for (k, v) in parse_pax(&self.read_data(size)?) {
                        match k.as_str() {
                            "path" => long_name = Some(v),
                            "size" => pax_size = v.parse().ok(),
                            _ => {}
                        }
                    }
                }
                b'0' | 0 | b'7' => {
                    let name = long_name.take().unwrap_or_else(|| {
                        let prefix = if &h[257..262] == b"ustar" { cstr(&h[345..500]) } else { String::new() };
                        let base = cstr(&h[..100]);
                        if prefix.is_empty() {
                            base
                        } else {
                            format!("{prefix}/{base}")
                        }
                    });
                    return Ok(Some((name, self.read_data(size)?)));
                }
                _ => {
                    // Directories, links, global pax headers...: skip their data.
                    self.read_data(size)?;
                    long_name = None;
                }
            }
        }
        Ok(None)
    }
}

fn parse_pax(data: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(sp) = rest.iter().position(|&b| b == b' ') {
        let Some(len) = std::str::from_utf8(&rest[..sp]).ok().and_then(|s| s.parse::<usize>().ok()) else { break };
        if len <= sp + 1 || len > rest.len() {
            break;
        }
        let record = &rest[sp + 1..len - 1];
        if let Some(eq) = record.iter().position(|&b| b == b'=') {
            out.push((
                String::from_utf8_lossy(&record[..eq]).into_owned(),
                String::from_utf8_lossy(&record[eq + 1..]).into_owned(),
            ));
        }
        rest = &rest[len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        let members = [("a_0.json.gz", vec![1u8; 700]), ("b.txt", vec![]), ("c.npy", vec![7u8; 512])];
        for (n, d) in &members {
            write_member(&mut buf, n, d).unwrap();
        }
        write_end(&mut buf).unwrap();
        assert_eq!(buf.len() % BLOCK, 0);
        let mut r = TarReader::new(&buf[..]);
        for (n, d) in &members {
            let (name, data) = r.next_member().unwrap().unwrap();
            assert_eq!((&name[..], &data), (*n, d));
        }
        assert!(r.next_member().unwrap().is_none());
    }

    #[test]
    fn truncated_and_garbage_are_errors() {
        let mut buf = Vec::new();
        write_member(&mut buf, "x.bin", &[5u8; 1000]).unwrap();
        assert!(TarReader::new(&buf[..700]).next_member().is_err());
        assert!(TarReader::new(&[b'z'; 1024][..]).next_member().is_err());
    }

    #[test]
    fn pax_records() {
        let mut data = Vec::new();
        for rec in ["path=some/long/name.json", "size=12"] {
            // The length counts itself, the space, the record and the newline.
            let body = rec.len() + 2;
            let len = body + (body + 2).to_string().len();
            data.extend_from_slice(format!("{len} {rec}\n").as_bytes());
        }
        let got = parse_pax(&data);
        assert_eq!(got, vec![("path".into(), "some/long/name.json".into()), ("size".into(), "12".into())]);
    }
}
