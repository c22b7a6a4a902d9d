//! Results cached per file in `.gpulint_cache/`, keyed by the file's content and the settings
//! it was checked with (each file may have its own), in one cache file per gpulint version and
//! command-line overrides. A corrupt, foreign or stale cache is ignored
//! and rebuilt: every entry is validated before it is used, and sealed with a hash of its
//! content (and of the file it is for), so that an entry changed on disk is a miss, not a
//! wrong result.

use crate::registry;
use gpulint_diagnostics::{Diagnostic, Label, Location, Severity, Span};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FORMAT: &str = "gpulint-cache-3";

#[derive(Serialize, Deserialize, Clone)]
struct CachedLabel {
    start: usize,
    end: usize,
    message: String,
}

#[derive(Serialize, Deserialize, Clone)]
struct CachedDiagnostic {
    code: String,
    severity: String,
    message: String,
    start: usize,
    end: usize,
    label: Option<String>,
    labels: Vec<CachedLabel>,
    notes: Vec<String>,
    help: Option<String>,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    cell: Option<usize>,
    fingerprint: String,
}

/// Another file or folder a result depends on, with its size and modification time then
/// (`None`: it did not exist).
#[derive(Serialize, Deserialize, Clone, PartialEq)]
struct Dependency {
    path: PathBuf,
    stamp: Option<(u64, u128)>,
}

fn stamp(path: &Path) -> Option<(u64, u128)> {
    let m = std::fs::metadata(path).ok()?;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Some((m.len(), mtime))
}

/// What is remembered about one file.
#[derive(Serialize, Deserialize, Clone)]
pub struct Entry {
    /// xxh3 of the file's bytes, seeded with the hash of its settings (see `result_hash`).
    hash: u64,
    /// Other files its findings depend on; a change to any of them invalidates the entry.
    dependencies: Vec<Dependency>,
    /// The file was parsed (false: no rule could match, it was not).
    parsed: bool,
    partial: bool,
    diagnostics: Vec<CachedDiagnostic>,
    /// The extensions a Python file builds (see `link`).
    #[serde(default)]
    links: Vec<crate::link::Link>,
    /// The calls a Python file makes into extension modules (see `link`).
    #[serde(default)]
    calls: Vec<gpulint_semantic::python::ext_calls::ExtCall>,
}

/// An entry as stored: with the xxh3 of its key and serialized content.
#[derive(Serialize, Deserialize)]
struct Sealed {
    seal: u64,
    entry: Entry,
}

/// The seal of an entry: the hash of its key and its content as serialized (serialization is
/// canonical, so an entry read back and serialized again gives the same bytes unless it was
/// changed).
fn seal(key: &str, entry: &Entry) -> Option<u64> {
    let mut bytes = serde_json::to_vec(entry).ok()?;
    bytes.push(0);
    bytes.extend_from_slice(key.as_bytes());
    Some(xxhash_rust::xxh3::xxh3_64(&bytes))
}

#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: String,
    version: String,
    settings: String,
    files: BTreeMap<String, Sealed>,
}

/// The cache of one run.
pub struct Cache {
    path: PathBuf,
    settings_key: String,
    old: BTreeMap<String, Entry>,
}

/// A cached result: findings, whether the file was parsed, whether partly, and what it
/// depends on.
pub type Cached = (
    Vec<Diagnostic>,
    bool,
    bool,
    Vec<PathBuf>,
    Vec<crate::link::Link>,
    Vec<gpulint_semantic::python::ext_calls::ExtCall>,
);

/// Hash of a file's content.
pub fn content_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Hash of a file's content checked with the settings of hash `settings` (`Engine::settings_hash`):
/// a result cached under other settings is a miss.
pub fn result_hash(bytes: &[u8], settings: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(bytes, settings)
}

impl Cache {
    /// Opens the cache under `dir` for runs with these command-line overrides (nothing is read if
    /// it does not match).
    pub fn open(dir: &Path, settings_key: &str) -> Cache {
        let key = format!("{:016x}", content_hash(settings_key.as_bytes()));
        let path = dir.join(format!("v{}-{key}.json", env!("CARGO_PKG_VERSION")));
        let old = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<CacheFile>(&b).ok())
            .filter(|c| {
                c.format == FORMAT && c.version == env!("CARGO_PKG_VERSION") && c.settings == key
            })
            .map(|c| {
                // An entry whose content no longer matches its seal was changed on disk: a miss.
                c.files
                    .into_iter()
                    .filter(|(k, s)| seal(k, &s.entry) == Some(s.seal))
                    .map(|(k, s)| (k, s.entry))
                    .collect()
            })
            .unwrap_or_default();
        Cache {
            path,
            settings_key: key,
            old,
        }
    }

    /// The cached result for `key` if the content hash matches, the files it depends on are
    /// unchanged, and every finding is valid for a text of `text_len` bytes.
    pub fn get(&self, key: &str, hash: u64, text_len: usize) -> Option<Cached> {
        let e = self.old.get(key).filter(|e| e.hash == hash)?;
        if e.dependencies.iter().any(|d| stamp(&d.path) != d.stamp) {
            return None;
        }
        let mut out = Vec::with_capacity(e.diagnostics.len());
        for c in &e.diagnostics {
            out.push(restore(c, text_len)?);
        }
        let deps = e.dependencies.iter().map(|d| d.path.clone()).collect();
        Some((
            out,
            e.parsed,
            e.partial,
            deps,
            e.links.clone(),
            e.calls.clone(),
        ))
    }

    /// Makes an entry to store.
    pub fn entry(
        hash: u64,
        parsed: bool,
        partial: bool,
        diagnostics: &[Diagnostic],
        dependencies: &[PathBuf],
        links: &[crate::link::Link],
    ) -> Entry {
        Entry {
            hash,
            dependencies: dependencies
                .iter()
                .map(|p| Dependency {
                    path: p.clone(),
                    stamp: stamp(p),
                })
                .collect(),
            parsed,
            partial,
            diagnostics: diagnostics.iter().map(store).collect(),
            links: links.to_vec(),
            calls: Vec::new(),
        }
    }

    /// `entry` with the calls a Python file makes into extension modules.
    pub fn with_calls(
        mut entry: Entry,
        calls: &[gpulint_semantic::python::ext_calls::ExtCall],
    ) -> Entry {
        entry.calls = calls.to_vec();
        entry
    }

    /// Writes the old entries updated with `fresh`, atomically. Errors are not fatal: a cache
    /// that cannot be written only makes the next run slower.
    pub fn save(self, fresh: Vec<(String, Entry)>) -> Result<(), String> {
        let mut entries = self.old;
        entries.extend(fresh);
        let files = entries
            .into_iter()
            .filter_map(|(k, entry)| {
                Some((
                    k.clone(),
                    Sealed {
                        seal: seal(&k, &entry)?,
                        entry,
                    },
                ))
            })
            .collect();
        let data = CacheFile {
            format: FORMAT.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            settings: self.settings_key,
            files,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            let _ = std::fs::write(&ignore, "# Automatically created by gpulint.\n*\n");
        }
        let bytes = serde_json::to_vec(&data).map_err(|e| e.to_string())?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| e.to_string())?;
        std::io::Write::write_all(&mut tmp, &bytes).map_err(|e| e.to_string())?;
        tmp.persist(&self.path).map_err(|e| e.to_string())?;
        Ok(())
    }
}

fn store(d: &Diagnostic) -> CachedDiagnostic {
    CachedDiagnostic {
        code: d.code.to_string(),
        severity: d.severity.as_str().to_string(),
        message: d.message.clone(),
        start: d.span.start,
        end: d.span.end,
        label: d.label.clone(),
        labels: d
            .labels
            .iter()
            .map(|l| CachedLabel {
                start: l.span.start,
                end: l.span.end,
                message: l.message.clone(),
            })
            .collect(),
        notes: d.notes.clone(),
        help: d.help.clone(),
        line: d.location.line,
        column: d.location.column,
        end_line: d.location.end_line,
        end_column: d.location.end_column,
        cell: d.cell,
        fingerprint: d.fingerprint.clone(),
    }
}

/// A finding back from the cache, or `None` if anything about it does not fit.
fn restore(c: &CachedDiagnostic, text_len: usize) -> Option<Diagnostic> {
    let meta = registry::find(&c.code).filter(|m| m.code == c.code)?;
    let severity = Severity::parse(&c.severity)?;
    let valid = |s: usize, e: usize| s <= e && e <= text_len;
    if !valid(c.start, c.end) || c.labels.iter().any(|l| !valid(l.start, l.end)) || c.line == 0 {
        return None;
    }
    let mut d =
        Diagnostic::new(meta, Span::new(c.start, c.end), c.message.clone()).severity(severity);
    d.label = c.label.clone();
    d.labels = c
        .labels
        .iter()
        .map(|l| Label {
            span: Span::new(l.start, l.end),
            message: l.message.clone(),
        })
        .collect();
    d.notes = c.notes.clone();
    d.help = c.help.clone();
    d.location = Location {
        line: c.line,
        column: c.column,
        end_line: c.end_line,
        end_column: c.end_column,
    };
    d.cell = c.cell;
    d.fingerprint = c.fingerprint.clone();
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_and_foreign_caches_are_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        let c = Cache::open(tmp.path(), "settings");
        let path = c.path.clone();
        std::fs::write(&path, b"{ not json").unwrap();
        assert!(Cache::open(tmp.path(), "settings").old.is_empty());
        // A well-formed cache whose entry names an unknown rule is not trusted.
        let mut d = Diagnostic::new(&crate::rules::tool::GL001, Span::new(0, 3), "x");
        d.location = Location {
            line: 1,
            column: 1,
            end_line: 1,
            end_column: 4,
        };
        let mut e = Cache::entry(7, true, false, &[d], &[], &[]);
        let c = Cache::open(tmp.path(), "settings");
        c.save(vec![("a.py".into(), e.clone())]).unwrap();
        let c = Cache::open(tmp.path(), "settings");
        assert!(c.get("a.py", 7, 10).is_some());
        assert!(c.get("a.py", 8, 10).is_none(), "content changed");
        assert!(c.get("a.py", 7, 2).is_none(), "span past the end");
        e.diagnostics[0].code = "ZZ999".into();
        c.save(vec![("a.py".into(), e)]).unwrap();
        assert!(Cache::open(tmp.path(), "settings")
            .get("a.py", 7, 10)
            .is_none());
        // A dependency that changed invalidates the entry.
        let dep = tmp.path().join("run.sh");
        std::fs::write(&dep, "export X=1\n").unwrap();
        let e = Cache::entry(9, true, false, &[], std::slice::from_ref(&dep), &[]);
        Cache::open(tmp.path(), "settings")
            .save(vec![("b.py".into(), e)])
            .unwrap();
        assert!(Cache::open(tmp.path(), "settings")
            .get("b.py", 9, 10)
            .is_some());
        std::fs::write(&dep, "export X=22\n").unwrap();
        assert!(Cache::open(tmp.path(), "settings")
            .get("b.py", 9, 10)
            .is_none());
        // Other settings: another cache file.
        assert!(Cache::open(tmp.path(), "other").old.is_empty());
    }

    /// What a cached result says, comparable.
    fn said(c: &Cached) -> String {
        let diags: Vec<CachedDiagnostic> = c.0.iter().map(store).collect();
        format!(
            "{}|{}|{}|{:?}|{}",
            serde_json::to_string(&diags).unwrap(),
            c.1,
            c.2,
            c.3,
            serde_json::to_string(&c.4).unwrap()
        )
    }

    #[test]
    fn an_entry_changed_on_disk_is_a_miss() {
        let tmp = tempfile::tempdir().unwrap();
        let mut d = Diagnostic::new(&crate::rules::tool::GL001, Span::new(12, 30), "unused");
        d.location = Location {
            line: 2,
            column: 3,
            end_line: 2,
            end_column: 21,
        };
        d.fingerprint = "0123456789abcdef0123456789abcdef:1".into();
        d.notes.push("note 42".into());
        let e = Cache::entry(987_654_321, true, false, &[d], &[], &[]);
        Cache::open(tmp.path(), "settings")
            .save(vec![("src/a.py".into(), e)])
            .unwrap();
        let path = Cache::open(tmp.path(), "settings").path;
        let original = std::fs::read(&path).unwrap();
        let get = || Cache::open(tmp.path(), "settings").get("src/a.py", 987_654_321, 100);
        let good = said(&get().expect("the entry as saved is a hit"));
        // Every byte changed to another of its class (digit, letter, other): the entry is
        // either dropped or read exactly as saved, never read as something else.
        let (mut misses, mut tried) = (0, 0);
        for i in 0..original.len() {
            let b = original[i];
            let to = match b {
                b'0'..=b'8' => b + 1,
                b'9' => b'0',
                b'a'..=b'y' | b'A'..=b'Y' => b + 1,
                b'z' | b'Z' => b - 1,
                _ => continue,
            };
            let mut bytes = original.clone();
            bytes[i] = to;
            std::fs::write(&path, &bytes).unwrap();
            tried += 1;
            match get() {
                None => misses += 1,
                Some(c) => assert_eq!(said(&c), good, "byte {i} changed to {:?}", to as char),
            }
        }
        // (A changed name of a defaulted field is read as the default it had: a hit, the same.)
        assert!(misses * 10 > tried * 9, "{misses} misses of {tried}");
    }
}
