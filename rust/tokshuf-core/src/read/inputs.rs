//! Turning `--input` arguments (files, directories, globs; local or in an object store) into an
//! ordered list of files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage;

/// The extensions picked up when a directory is given: JSON lines, Parquet and Arrow.
pub const INPUT_EXTENSIONS: &[&str] = &[".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.zstd", ".parquet", ".arrow"];

/// Paths a scan lists one by one in [`ScanReport::first_scan_skipped`]; the counts stay exact.
const LISTED: usize = 100;

/// A file or directory a directory scan passed over, and why: `hidden` (its name begins with `.`;
/// nothing below a hidden directory is looked at), `extension` (its name ends in none of the
/// input extensions, compared case-sensitively), `link_loop` (a directory link back to a
/// directory being scanned) or `invalid_key` (an object key the store client cannot name: a
/// control character, an empty part as in `a//b`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanSkip {
    /// The file or directory.
    pub path: PathBuf,
    /// `hidden`, `extension`, `link_loop` or `invalid_key`.
    pub reason: String,
}

/// What the scans of the directories (and object-store prefixes) among the inputs passed over,
/// as run summaries report it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanReport {
    /// Paths passed over, by reason.
    pub scan_skipped: BTreeMap<String, u64>,
    /// The first of them (in scan order).
    pub first_scan_skipped: Vec<ScanSkip>,
}

impl ScanReport {
    fn add(&mut self, path: PathBuf, reason: &str) {
        *self.scan_skipped.entry(reason.to_string()).or_default() += 1;
        if self.first_scan_skipped.len() < LISTED {
            self.first_scan_skipped.push(ScanSkip { path, reason: reason.to_string() });
        }
    }

    /// Paths passed over.
    pub fn total(&self) -> u64 {
        self.scan_skipped.values().sum()
    }
}

/// The files the inputs expand to, and what a scan passed over.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The input files, in processing order.
    pub files: Vec<PathBuf>,
    /// What directory scans passed over.
    pub scan: ScanReport,
}

/// Why a scan passes over an entry named `name` (a file unless `dir`), if it does.
fn pass_over(name: &str, dir: bool, exts: &[&str]) -> Option<&'static str> {
    if name.starts_with('.') {
        Some("hidden")
    } else if !dir && !exts.iter().any(|e| name.ends_with(e)) {
        Some("extension")
    } else {
        None
    }
}

fn has_glob_chars(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// What identifies a file or directory whatever path reaches it: (device, inode).
type FileId = (u64, u64);

fn file_id(path: &Path) -> Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    Ok((m.dev(), m.ino()))
}

/// The files taken so far, to refuse one reached a second time (given twice, a directory and a
/// file in it, two overlapping globs, a link): reading it twice would silently double its
/// documents.
#[derive(Default)]
struct Taken {
    local: std::collections::HashMap<FileId, PathBuf>,
    remote: std::collections::HashSet<PathBuf>,
}

impl Taken {
    fn add(&mut self, path: &Path) -> Result<()> {
        // Standard input and objects have no inode: they are told apart by name.
        let first = if storage::is_remote(&path.to_string_lossy()) || super::is_stdin(path) {
            (!self.remote.insert(path.to_path_buf())).then(|| path.to_path_buf())
        } else {
            self.local.insert(file_id(path)?, path.to_path_buf())
        };
        if let Some(first) = first {
            return Err(Error::invalid(format!(
                "{} is the same file as {} (given twice, inside a directory also given, or reached \
                 through a link): each input file may be read only once, so give it once",
                path.display(),
                first.display()
            )));
        }
        Ok(())
    }
}

/// Every file below `dir` whose name ends in one of `exts`, sorted by path; hidden files and
/// directories are passed over, and so is a directory link that leads back to a directory being
/// walked (a loop, `d/self -> .`: everything below it is already being walked).
fn walk(
    dir: &Path,
    exts: &[&str],
    ancestors: &mut Vec<FileId>,
    out: &mut Vec<PathBuf>,
    scan: &mut ScanReport,
) -> Result<()> {
    let mut entries = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .map(|e| e.map(|e| e.path()).map_err(|e| Error::io(dir, e)))
        .collect::<Result<Vec<_>>>()?;
    // Sorted, so that which of two paths to one file comes first never depends on the listing.
    entries.sort();
    for path in entries {
        let dir = path.is_dir();
        // A name that is not UTF-8 ends in none of the extensions.
        let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        if let Some(reason) = pass_over(&name, dir, exts) {
            scan.add(path, reason);
        } else if dir {
            let id = file_id(&path)?;
            if ancestors.contains(&id) {
                scan.add(path, "link_loop");
                continue;
            }
            ancestors.push(id);
            walk(&path, exts, ancestors, out, scan)?;
            ancestors.pop();
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// An object-store input: an object, or a prefix (as a directory: keys with a hidden part below
/// it, or none of `exts`, are passed over), or a glob over keys. A URL naming no object (a
/// bucket root) or ending in `/` is a prefix; otherwise the object it names is looked up first
/// (so a key with `*`, `?` or `[` in its name is read as itself), and only if the store says it
/// does not exist is the URL a glob or a prefix: a failing store fails the run with its own
/// answer. A key the store client cannot name is passed over as `invalid_key`.
fn expand_remote(spec: &str, exts: &[&str], files: &mut Vec<PathBuf>, scan: &mut ScanReport) -> Result<()> {
    let remote = storage::resolve(spec)?;
    let key = remote.key.as_ref();
    if !key.is_empty() && !spec.ends_with('/') {
        match storage::size(Path::new(spec)) {
            Ok(_) => {
                files.push(storage::as_path(&remote));
                return Ok(());
            }
            Err(Error::Io { ref source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let passed_before = scan.total();
    let (found, invalid) = if has_glob_chars(key) && !spec.ends_with('/') {
        let listing = storage::glob(&remote)?;
        (listing.objects, listing.invalid)
    } else {
        let listing = storage::list_all(&remote)?;
        let prefix = key.len();
        let mut taken = Vec::new();
        for object in listing.objects {
            let key = object.key.as_ref();
            let below = key.get(prefix..).unwrap_or(key).trim_start_matches('/');
            let hidden = below.split('/').any(|part| part.starts_with('.'));
            match if hidden { Some("hidden") } else { pass_over(below, false, exts) } {
                Some(reason) => scan.add(storage::as_path(&object), reason),
                None => taken.push(object),
            }
        }
        (taken, listing.invalid)
    };
    let base = remote
        .url
        .split_once("://")
        .map_or(String::new(), |(scheme, rest)| format!("{scheme}://{}/", rest.split('/').next().unwrap_or_default()));
    for key in invalid {
        // Control characters escaped: the path goes into logs and summaries.
        scan.add(PathBuf::from(format!("{base}{}", key.escape_debug())), "invalid_key");
    }
    if found.is_empty() && scan.total() == passed_before {
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
///
/// A directory scan passes over hidden files and directories (names beginning with `.`) and
/// files with other extensions, and reports them ([`ScanReport`]). A file reached twice (by
/// (device, inode), whatever the paths) is refused with an error that names both paths; a
/// directory loop made by a link is not followed.
pub fn expand_inputs(specs: &[impl AsRef<str>], exts: &[&str]) -> Result<Inputs> {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut scan = ScanReport::default();
    for spec in specs {
        let spec = spec.as_ref();
        let path = Path::new(spec);
        if spec == super::STDIN {
            if files.iter().any(|f: &PathBuf| super::is_stdin(f)) {
                return Err(Error::invalid("standard input (`-`) is given twice"));
            }
            files.push(PathBuf::from(spec));
        } else if storage::is_remote(spec) {
            expand_remote(spec, exts, &mut files, &mut scan)?;
        } else if path.is_file() {
            files.push(path.to_path_buf());
        } else if path.is_dir() {
            let mut found = Vec::new();
            walk(path, exts, &mut vec![file_id(path)?], &mut found, &mut scan)?;
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
    let mut taken = Taken::default();
    for f in &files {
        taken.add(f)?;
    }
    if files.is_empty() {
        let specs: Vec<&str> = specs.iter().map(|s| s.as_ref()).collect();
        let passed: Vec<String> = scan.scan_skipped.iter().map(|(reason, n)| format!("{n} {reason}")).collect();
        return Err(Error::invalid(format!(
            "no input files found in {specs:?} (directories are searched for {}, hidden names aside; passed \
             over: {})",
            exts.join(", "),
            if passed.is_empty() { "nothing".to_string() } else { passed.join(", ") }
        )));
    }
    Ok(Inputs { files, scan })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary directory holding the empty `files` (paths relative to it).
    fn tree<S: AsRef<str>>(files: impl IntoIterator<Item = S>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let path = dir.path().join(f.as_ref());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        dir
    }

    #[test]
    fn directories_are_walked_and_sorted() {
        let dir = tree(["b/sub/z.jsonl", "a.jsonl.zst", "b/a.jsonl.gz", "notes.txt", "c.jsonl"]);
        let d = dir.path();
        let got = expand_inputs(&[d.to_str().unwrap()], INPUT_EXTENSIONS).unwrap().files;
        let rel: Vec<_> = got.iter().map(|p| p.strip_prefix(d).unwrap().to_str().unwrap().to_string()).collect();
        assert_eq!(rel, ["a.jsonl.zst", "b/a.jsonl.gz", "b/sub/z.jsonl", "c.jsonl"]);
    }

    #[test]
    fn a_scan_reports_what_it_passes_over() {
        let files =
            ["a.jsonl", ".b.jsonl", "C.JSONL", "d.jsonl.zstd", "e.txt", "f.jsonl.bak", ".cache/g.jsonl", "sub/h.arrow"];
        let dir = tree(files);
        let d = dir.path();
        let got = expand_inputs(&[d.to_str().unwrap()], INPUT_EXTENSIONS).unwrap();
        assert_eq!(got.files, [d.join("a.jsonl"), d.join("d.jsonl.zstd"), d.join("sub/h.arrow")]);
        let skipped: Vec<(PathBuf, &str)> =
            got.scan.first_scan_skipped.iter().map(|s| (s.path.clone(), s.reason.as_str())).collect();
        // In path order; a hidden directory is one entry, not walked.
        assert_eq!(
            skipped,
            [
                (d.join(".b.jsonl"), "hidden"),
                (d.join(".cache"), "hidden"),
                (d.join("C.JSONL"), "extension"),
                (d.join("e.txt"), "extension"),
                (d.join("f.jsonl.bak"), "extension"),
            ]
        );
        assert_eq!(got.scan.scan_skipped, BTreeMap::from([("extension".into(), 3), ("hidden".into(), 2)]));
        // A file given by name is taken whatever its name.
        let named = expand_inputs(&[d.join(".b.jsonl").to_str().unwrap()], INPUT_EXTENSIONS).unwrap();
        assert_eq!((named.files, named.scan), (vec![d.join(".b.jsonl")], ScanReport::default()));
        // A scan that finds nothing says what it passed over.
        let dir = tree(["a.JSONL", ".b.jsonl"]);
        let err = expand_inputs(&[dir.path().to_str().unwrap()], INPUT_EXTENSIONS).unwrap_err().to_string();
        assert!(err.contains("passed over: 1 extension, 1 hidden"), "{err}");
    }

    #[test]
    fn the_docs_list_every_reason_a_scan_passes_over() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/preprocess.md")).unwrap();
        for reason in ["hidden", "extension", "link_loop", "invalid_key"] {
            assert!(page.contains(&format!("`{reason}`")), "docs/preprocess.md does not list `{reason}`");
        }
    }

    #[test]
    fn a_scan_lists_the_first_paths_and_counts_them_all() {
        let dir = tree((0..LISTED + 5).map(|i| format!("{i:04}.txt")).chain(["x.jsonl".into()]));
        let got = expand_inputs(&[dir.path().to_str().unwrap()], INPUT_EXTENSIONS).unwrap();
        assert_eq!(got.scan.scan_skipped["extension"], LISTED as u64 + 5);
        assert_eq!(got.scan.first_scan_skipped.len(), LISTED);
        assert_eq!(got.scan.first_scan_skipped[0].path, dir.path().join("0000.txt"));
    }

    #[cfg(unix)]
    #[test]
    fn directory_loops_are_not_followed() {
        let dir = tree(["a.jsonl", "sub/b.jsonl"]);
        let d = dir.path();
        // Two loops: followed, the walk would take each file again at every depth, exponentially.
        std::os::unix::fs::symlink(".", d.join("self")).unwrap();
        std::os::unix::fs::symlink("..", d.join("sub/up")).unwrap();
        let got = expand_inputs(&[d.to_str().unwrap()], INPUT_EXTENSIONS).unwrap();
        assert_eq!(got.files, [d.join("a.jsonl"), d.join("sub/b.jsonl")]);
        let loops: Vec<_> = got.scan.first_scan_skipped.iter().map(|s| (s.path.clone(), s.reason.as_str())).collect();
        assert_eq!(loops, [(d.join("self"), "link_loop"), (d.join("sub/up"), "link_loop")]);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_reached_twice_is_refused_naming_both_paths() {
        let dir = tree(["data/a.jsonl"]);
        let d = dir.path();
        std::os::unix::fs::symlink("data/a.jsonl", d.join("link.jsonl")).unwrap();
        let (a, data, link) = (d.join("data/a.jsonl"), d.join("data"), d.join("link.jsonl"));
        let s = |p: &Path| p.to_str().unwrap().to_string();
        for specs in [vec![s(&a), s(&a)], vec![s(&data), s(&a)], vec![s(&a), s(&link)]] {
            let err = expand_inputs(&specs, INPUT_EXTENSIONS).unwrap_err().to_string();
            assert!(err.contains("same file") && err.contains(&s(&a)), "{specs:?}: {err}");
        }
        // A link to a directory beside the directory: its files are the same files.
        std::os::unix::fs::symlink("data", d.join("alias")).unwrap();
        let err = expand_inputs(&[s(d)], INPUT_EXTENSIONS).unwrap_err().to_string();
        assert!(err.contains("same file"), "{err}");
    }

    #[test]
    fn missing_input_is_not_found() {
        let err = expand_inputs(&["/nonexistent/x.jsonl"], INPUT_EXTENSIONS).unwrap_err();
        assert!(matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound));
    }

    #[test]
    fn globs_are_sorted() {
        let dir = tree(["x2.jsonl", "x10.jsonl", "x1.jsonl"]);
        let pat = format!("{}/x*.jsonl", dir.path().display());
        let got = expand_inputs(&[pat], INPUT_EXTENSIONS).unwrap().files;
        let names: Vec<_> = got.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["x1.jsonl", "x10.jsonl", "x2.jsonl"]);
    }
}
