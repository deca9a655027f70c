//! Turning `--input` arguments (files, directories, globs; local or in an object store) into an
//! ordered list of files.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage;

/// The JSON-lines extensions.
pub const JSONL_EXTENSIONS: &[&str] = &[".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.zstd"];

/// The extensions picked up when a directory is given: JSON lines, Parquet and Arrow.
pub const INPUT_EXTENSIONS: &[&str] = &[".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.zstd", ".parquet", ".arrow"];

fn has_glob_chars(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn walk(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.is_dir() {
            walk(&path, exts, out)?;
        } else if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| exts.iter().any(|e| n.ends_with(e))) {
            out.push(path);
        }
    }
    Ok(())
}

/// An object-store input: an object, or a prefix (as a directory), or a glob over keys.
fn expand_remote(spec: &str, exts: &[&str], files: &mut Vec<PathBuf>) -> Result<()> {
    let remote = storage::resolve(spec)?;
    let found = if has_glob_chars(remote.key.as_ref()) {
        storage::glob(&remote)?
    } else if storage::size(Path::new(spec)).is_ok() {
        vec![remote]
    } else {
        storage::list(&remote, exts)?
    };
    if found.is_empty() {
        return Err(Error::io(
            Path::new(spec),
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such object, and no objects under it"),
        ));
    }
    files.extend(found.iter().map(storage::as_path));
    Ok(())
}

/// Expand inputs in argument order: a file is taken as is (and `-`, standard input); a directory contributes every file
/// below it whose name ends in one of `exts`, sorted by path; a glob contributes its matching
/// files, sorted. In an object store (`s3://bucket/...`) the same, keys standing for paths: an
/// object, every object under a prefix, or every object a glob matches, sorted by key. The
/// result depends only on the arguments and the files, never on the order they are listed in.
pub fn expand_inputs(specs: &[impl AsRef<str>], exts: &[&str]) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = Vec::new();
    for spec in specs {
        let spec = spec.as_ref();
        let path = Path::new(spec);
        if spec == super::STDIN {
            if files.iter().any(|f: &PathBuf| super::is_stdin(f)) {
                return Err(Error::invalid("standard input (`-`) is given twice"));
            }
            files.push(PathBuf::from(spec));
        } else if storage::is_remote(spec) {
            expand_remote(spec, exts, &mut files)?;
        } else if path.is_file() {
            files.push(path.to_path_buf());
        } else if path.is_dir() {
            let mut found = Vec::new();
            walk(path, exts, &mut found)?;
            found.sort();
            files.extend(found);
        } else if has_glob_chars(spec) {
            let pattern = glob::glob(spec).map_err(|e| Error::invalid(format!("bad glob pattern {spec:?}: {e}")))?;
            let mut found: Vec<PathBuf> = pattern.filter_map(|p| p.ok()).filter(|p| p.is_file()).collect();
            found.sort();
            if found.is_empty() {
                return Err(Error::invalid(format!("the pattern {spec:?} matches no files")));
            }
            files.extend(found);
        } else {
            return Err(Error::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "input does not exist")));
        }
    }
    if files.is_empty() {
        let specs: Vec<&str> = specs.iter().map(|s| s.as_ref()).collect();
        return Err(Error::invalid(format!(
            "no input files found in {specs:?} (directories are searched for {})",
            exts.join(", ")
        )));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_walked_and_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("b/sub")).unwrap();
        for f in ["b/sub/z.jsonl", "a.jsonl.zst", "b/a.jsonl.gz", "notes.txt", "c.jsonl"] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let got = expand_inputs(&[d.to_str().unwrap()], JSONL_EXTENSIONS).unwrap();
        let rel: Vec<_> = got.iter().map(|p| p.strip_prefix(d).unwrap().to_str().unwrap().to_string()).collect();
        assert_eq!(rel, ["a.jsonl.zst", "b/a.jsonl.gz", "b/sub/z.jsonl", "c.jsonl"]);
    }

    #[test]
    fn missing_input_is_not_found() {
        let err = expand_inputs(&["/nonexistent/x.jsonl"], JSONL_EXTENSIONS).unwrap_err();
        assert!(matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound));
    }

    #[test]
    fn globs_are_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["x2.jsonl", "x10.jsonl", "x1.jsonl"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let pat = format!("{}/x*.jsonl", dir.path().display());
        let got = expand_inputs(&[pat], JSONL_EXTENSIONS).unwrap();
        let names: Vec<_> = got.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["x1.jsonl", "x10.jsonl", "x2.jsonl"]);
    }
}
