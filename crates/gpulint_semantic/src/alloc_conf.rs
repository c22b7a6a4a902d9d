//! The syntax of PyTorch's CUDA caching-allocator configuration (`PYTORCH_CUDA_ALLOC_CONF`,
//! `PYTORCH_ALLOC_CONF`, `torch.cuda.memory._set_allocator_settings`): `key:value` items
//! separated by commas (commas inside `[...]` belong to the value), the keys and values the
//! parser accepts, the release that introduced a key, and the options `cudaMallocAsync`
//! ignores. Shared by the Python and the launcher/Dockerfile sides of PT006.

use std::ops::Range;

/// A torch release line, `(major, minor)`.
pub type Minor = (u64, u64);

/// Keys the allocator accepts.
pub const KEYS: &[&str] = &[
    "backend",
    "large_segment_size_mb",
    "max_split_size_mb",
    "roundup_power2_divisions",
    "max_non_split_rounding_mb",
    "garbage_collection_threshold",
    "expandable_segments",
    "pinned_use_cuda_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
    "pinned_reserve_segment_size_mb",
    "pinned_max_round_threshold_mb",
    "pinned_max_cached_size_mb",
    "graph_capture_record_stream_reuse",
    "per_process_memory_fraction",
    "throw_on_cudamalloc_oom",
    "release_lock_on_cudamalloc",
];

/// Keys that older releases reject as unrecognized, with the first release line that accepts
/// them (`expandable_segments`: torch 2.1).
const SINCE: &[(&str, Minor)] = &[("expandable_segments", (2, 1))];

/// Options of the native allocator that `backend:cudaMallocAsync` ignores (with a warning).
const NATIVE_ONLY: &[&str] = &[
    "max_split_size_mb",
    "roundup_power2_divisions",
    "garbage_collection_threshold",
];

/// What is wrong with one item.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// Not an option of any release: `RuntimeError: Unrecognized CachingAllocator option`.
    UnknownKey,
    /// A value the parser rejects.
    BadValue { expected: &'static str },
    /// An option that the pinned torch predates: rejected as unrecognized there.
    TooNew { since: Minor, newest: Minor },
    /// Ignored because the same configuration selects `backend:cudaMallocAsync`.
    IgnoredUnderAsync,
}

/// One problem, located in the configuration string.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub problem: Problem,
    pub key: String,
    pub value: String,
    /// The item's key in the configuration string (byte range).
    pub range: Range<usize>,
}

impl Finding {
    /// Does the allocator refuse the whole configuration (the run dies)?
    pub fn is_fatal(&self) -> bool {
        !matches!(self.problem, Problem::IgnoredUnderAsync)
    }
}

/// `key:value` items with the byte range of each key.
fn items(conf: &str) -> Vec<(&str, &str, Range<usize>)> {
    let mut out = Vec::new();
    let mut push = |start: usize, end: usize| {
        let item = &conf[start..end];
        let lead = item.len() - item.trim_start().len();
        let item = item.trim();
        if item.is_empty() {
            return;
        }
        let (key, value) = match item.split_once(':') {
            Some((k, v)) => (k.trim_end(), v.trim()),
            None => (item, ""),
        };
        let at = start + lead;
        out.push((key, value, at..at + key.len()));
    };
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in conf.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth <= 0 => {
                push(start, i);
                start = i + 1;
            }
            _ => {}
        }
    }
    push(start, conf.len());
    out
}

/// The problems of a configuration string. `torch` is the set of release lines the project
/// pins; when it is unknown, only problems that hold in every release are reported.
pub fn check(conf: &str, torch: Option<&[Minor]>) -> Vec<Finding> {
    let items = items(conf);
    let uses_async = items
        .iter()
        .any(|(k, v, _)| *k == "backend" && *v == "cudaMallocAsync");
    let newest = torch.and_then(|t| t.iter().copied().max());
    let mut out = Vec::new();
    for (key, value, range) in items {
        let finding = |problem| Finding {
            problem,
            key: key.to_string(),
            value: value.to_string(),
            range: range.clone(),
        };
        // `${EXTRA}`, `%CONF%`, `{opts}`: filled in later, not judged.
        if key.contains(['$', '%', '{', '}']) || value.contains(['$', '%', '{', '}']) {
            continue;
        }
        if !KEYS.contains(&key) {
            out.push(finding(Problem::UnknownKey));
            continue;
        }
        if let Some(expected) = bad_value(key, value) {
            out.push(finding(Problem::BadValue { expected }));
            continue;
        }
        if let (Some(newest), Some(&(_, since))) = (newest, SINCE.iter().find(|(k, _)| *k == key)) {
            if newest < since {
                out.push(finding(Problem::TooNew { since, newest }));
                continue;
            }
        }
        if uses_async && NATIVE_ONLY.contains(&key) {
            out.push(finding(Problem::IgnoredUnderAsync));
        }
    }
    out
}

fn bad_value(key: &str, value: &str) -> Option<&'static str> {
    match key {
        "backend" if !matches!(value, "native" | "cudaMallocAsync") => {
            Some("`native` or `cudaMallocAsync`")
        }
        "expandable_segments"
        | "pinned_use_cuda_host_register"
        | "pinned_use_background_threads"
        | "release_lock_on_cudamalloc"
        | "graph_capture_record_stream_reuse"
        | "throw_on_cudamalloc_oom"
            if !matches!(value, "True" | "False" | "true" | "false") =>
        {
            Some("`True` or `False`")
        }
        "garbage_collection_threshold"
            if !value.parse::<f64>().is_ok_and(|v| v > 0.0 && v < 1.0) =>
        {
            Some("a number strictly between 0 and 1")
        }
        "per_process_memory_fraction"
            if !value.parse::<f64>().is_ok_and(|v| (0.0..=1.0).contains(&v)) =>
        {
            Some("a number between 0 and 1")
        }
        "max_split_size_mb"
        | "large_segment_size_mb"
        | "max_non_split_rounding_mb"
        | "pinned_num_register_threads"
        | "pinned_reserve_segment_size_mb"
        | "pinned_max_round_threshold_mb"
        | "pinned_max_cached_size_mb"
            if value.parse::<u64>().is_err() =>
        {
            Some("a whole number")
        }
        _ => None,
    }
}

/// The documented key closest to a misspelled one.
pub fn suggestion(key: &str) -> Option<&'static str> {
    let k = key.to_ascii_lowercase();
    if k.is_empty() {
        return None;
    }
    KEYS.iter().copied().find(|c| {
        *c == k || c.starts_with(&k) || k.starts_with(c) || c.replace('_', "") == k.replace('_', "")
    })
}

/// Where `conf` (a value as the program sees it) starts inside `raw` (the text that writes it,
/// quotes and all), when it is written there verbatim.
pub fn offset_in(raw: &str, conf: &str) -> Option<usize> {
    if conf.is_empty() {
        return None;
    }
    raw.find(conf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(conf: &str, torch: Option<&[Minor]>) -> Vec<(Problem, String)> {
        check(conf, torch)
            .into_iter()
            .map(|f| (f.problem, f.key))
            .collect()
    }

    #[test]
    fn parses_allocator_config() {
        assert!(check("expandable_segments:True", None).is_empty());
        assert!(check(
            "max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:8],garbage_collection_threshold:0.6",
            None
        )
        .is_empty());
        assert_eq!(
            problems("max_split_size:128", None),
            [(Problem::UnknownKey, "max_split_size".to_string())]
        );
        assert_eq!(check("expandable_segments:1", None).len(), 1);
        assert_eq!(check("garbage_collection_threshold:1.5", None).len(), 1);
        let f = check("max_split_size_mb:64, expandable_segment:True", None);
        assert_eq!(f[0].range, 22..40);
    }

    #[test]
    fn version_and_backend() {
        let old: &[Minor] = &[(1, 13), (2, 0)];
        let new: &[Minor] = &[(2, 0), (2, 1)];
        assert_eq!(
            problems("expandable_segments:True", Some(old)),
            [(
                Problem::TooNew {
                    since: (2, 1),
                    newest: (2, 0)
                },
                "expandable_segments".to_string()
            )]
        );
        assert!(check("expandable_segments:True", Some(new)).is_empty());
        assert_eq!(
            problems("backend:cudaMallocAsync,max_split_size_mb:128", None),
            [(Problem::IgnoredUnderAsync, "max_split_size_mb".to_string())]
        );
        assert!(check("backend:cudaMallocAsync", None).is_empty());
        assert!(check("${PYTORCH_CUDA_ALLOC_CONF},max_split_size_mb:${MB}", None).is_empty());
        assert_eq!(offset_in("X=\"a:b\"", "a:b"), Some(3));
        assert_eq!(suggestion("max_split_size"), Some("max_split_size_mb"));
    }
}
