//! `gpulint decode CODE`: what a crashed training process's exit code means, what it does not
//! mean, which rules look for its causes, and how to learn more.
//!
//! The table is data: one `Entry` per code. Windows codes are NTSTATUS values (rules.md,
//! Appendix A); POSIX codes are fatal signals, shown by shells and containers as `128 + N` and by
//! Python's `subprocess` as `-N`.

use gpulint_linter::registry;
use std::fmt::Write;

/// What an exit code is, once decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// A Windows NTSTATUS value (the unsigned form).
    NtStatus(u32),
    /// A POSIX signal number, and how it was spelled (`128 + N` or `-N`).
    Signal(u32, SignalSpelling),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalSpelling {
    /// `139`: a shell's or a container's exit status, 128 + signal.
    Shell,
    /// `-11`: Python's `subprocess` return code for a process killed by a signal.
    Negative,
}

/// One known exit code.
pub struct Entry {
    pub key: Key,
    /// Symbolic name: `STATUS_STACK_BUFFER_OVERRUN`, `SIGSEGV`.
    pub name: &'static str,
    /// One line.
    pub title: &'static str,
    pub means: &'static str,
    pub does_not_mean: &'static str,
    /// Rules that find causes of this exit in the source.
    pub rules: &'static [&'static str],
    /// How to get more information from the failing run.
    pub more: &'static [&'static str],
    pub references: &'static [&'static str],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    NtStatus(u32),
    Signal(u32),
}

const FAULTHANDLER: &str =
    "Run the script with `python -X faulthandler train.py`: a fatal error then prints the Python stack of every thread.";
const LAUNCH_BLOCKING: &str =
    "Set `CUDA_LAUNCH_BLOCKING=1` so that a CUDA error is reported by the launch that caused it, not by a later call.";
const MS_ERREF: &str = "MS-ERREF §2.3.1, NTSTATUS values: https://learn.microsoft.com/en-us/openspecs/windows_protocols/ms-erref/596a1078-e883-4972-9bbc-49e60bebca55";
const SIGNAL7: &str = "signal(7), the standard signals and their default actions: https://man7.org/linux/man-pages/man7/signal.7.html";

/// The table. Keep Windows codes first, in the order of rules.md Appendix A.
pub static TABLE: &[Entry] = &[
    Entry {
        key: Key::NtStatus(0xC000_0409),
        name: "STATUS_STACK_BUFFER_OVERRUN",
        title: "the process ended itself through fail-fast (__fastfail): an abort, a fatal check, or an uncaught C++ exception",
        means: "Since Windows 8 every fail-fast request (`__fastfail`) ends the process with this code, whatever its reason. \
The C runtime's `abort()` uses fail-fast (sub-code 7, FAST_FAIL_FATAL_APP_EXIT), and `std::terminate()` calls `abort()`. \
In a training process that is typically a TensorFlow `CHECK` failure or `LOG(FATAL)`, an uncaught C++ exception in a native \
extension, a CUDA or cuDNN library that fails to load or initialise and aborts (a version mismatch, or a missing \
`zlibwapi.dll` for cuDNN 8.3 and later), or a CUDA error that op code escalates to an abort. A genuine /GS stack-cookie \
failure (sub-code 2) is the rare case.",
        does_not_mean: "It is not evidence of a stack overflow, and only rarely of a buffer overrun, despite its name: a real stack overflow \
exits with 0xC00000FD (-1073741571). Unbounded Python recursion normally ends as `RecursionError`, or as 0xC00000FD when the \
recursion limit was raised. It is not a GPU out-of-memory error either: those are reported as exceptions first.",
        rules: &["MF004", "MF007", "OP005", "CU009", "CU010", "PY002"],
        more: &[
            "Read the last lines the process wrote to stderr: TensorFlow prints `Check failed:` or a line starting with `F` before a fatal exit, and a missing DLL is named there.",
            FAULTHANDLER,
            LAUNCH_BLOCKING,
            "From a crash dump, the first exception parameter is the fail-fast sub-code (2 = stack cookie, 7 = fatal app exit): in WinDbg, `.exr -1` or `!analyze -v`.",
        ],
        references: &[
            "__fastfail (\"exception code 0xC0000409\"): https://learn.microsoft.com/en-us/cpp/intrinsics/fastfail",
            "R. Chen, \"STATUS_STACK_BUFFER_OVERRUN doesn't mean that there was a stack buffer overrun\": https://devblogs.microsoft.com/oldnewthing/?p=100655",
            MS_ERREF,
        ],
    },
    Entry {
        key: Key::NtStatus(0xC000_0374),
        name: "STATUS_HEAP_CORRUPTION",
        title: "the native heap's bookkeeping was found corrupted",
        means: "Memory management data of the native heap was overwritten. Typical causes: out-of-bounds host writes in \
extension glue code (a raw pointer from a tensor that is not contiguous, or of another dtype or size than assumed), a \
double free, memory freed by another C runtime than the one that allocated it, or writes past the end of a pinned or \
host-mapped buffer.",
        does_not_mean: "It is not a GPU out-of-memory error. The module named in the crash report is not necessarily the \
culprit: corruption is detected when the heap is next used, often far from the faulty write.",
        rules: &["CU002", "CU003", "OP001", "OP002", "OP003"],
        more: &[
            "Enable full page heap for the interpreter (`gflags /p /enable python.exe /full`, from the Debugging Tools for Windows) so that the process stops at the faulty write instead of later.",
            FAULTHANDLER,
            "Build the extension in debug mode, and run its kernels under `compute-sanitizer --tool memcheck` (with `PYTORCH_NO_CUDA_MEMORY_CACHING=1` for PyTorch).",
        ],
        references: &[MS_ERREF],
    },
    Entry {
        key: Key::NtStatus(0xC000_0005),
        name: "STATUS_ACCESS_VIOLATION",
        title: "a read or write through a null or wild host pointer",
        means: "Native host code used a pointer that points nowhere valid. Typical causes: an unchecked `cudaMalloc` (or \
other CUDA runtime) result used on the host, a DLL or ABI mismatch at import (a framework built for other CUDA or cuDNN \
versions, tensorflow/tensorflow#26853), or an extension compiled against another version of torch than the one installed.",
        does_not_mean: "It is not a CUDA kernel's illegal memory access: that is reported as a CUDA error (\"an illegal \
memory access was encountered\") by the next runtime call, not as a Windows access violation. It is not a GPU \
out-of-memory error.",
        rules: &["CU010", "MF001", "MF004", "MF005", "MF006"],
        more: &[
            FAULTHANDLER,
            "If it happens at `import`, compare the installed framework, CUDA and cuDNN versions with the framework's tested configurations, and rebuild extensions against the installed framework.",
            "From a crash dump, WinDbg's `!analyze -v` names the faulting module.",
        ],
        references: &[MS_ERREF],
    },
    Entry {
        key: Key::NtStatus(0xC000_00FD),
        name: "STATUS_STACK_OVERFLOW",
        title: "a thread's stack was exhausted",
        means: "A thread used up its stack. In Python training code that is typically deep recursion after \
`sys.setrecursionlimit` was raised far enough that the interpreter runs out of C stack (python.exe's main thread has \
about 2 MB) before it raises `RecursionError`.",
        does_not_mean: "It is not a GPU memory problem, and not the same as 0xC0000409 (-1073740791), which is a fail-fast \
exit that only its name relates to stacks.",
        rules: &["PY001", "PY002"],
        more: &[
            FAULTHANDLER,
            "Check `sys.getrecursionlimit()` and where it is raised; make the recursion iterative, or run it in a `threading.Thread` started after `threading.stack_size(...)` was enlarged.",
        ],
        references: &[MS_ERREF],
    },
    Entry {
        key: Key::Signal(6),
        name: "SIGABRT",
        title: "the process aborted itself: a fatal check, an uncaught C++ exception, or detected heap corruption",
        means: "Native code called `abort()`. Typical causes in training: a TensorFlow `CHECK` failure or `LOG(FATAL)`, \
an uncaught C++ exception in an extension (`std::terminate`), glibc detecting heap corruption (\"double free or \
corruption\", \"free(): invalid pointer\"), a CUDA, cuDNN or NCCL library aborting at load or on an error.",
        does_not_mean: "It is not the out-of-memory killer (that is SIGKILL, 137), and it is not a Python exception: those \
print a traceback and exit with 1.",
        rules: &["MF004", "OP001", "OP002", "OP003", "OP005", "CU009", "CU010"],
        more: &[
            "Read the last lines the process wrote to stderr: `Check failed:`, `terminate called after throwing`, or glibc's message name the cause.",
            FAULTHANDLER,
            LAUNCH_BLOCKING,
            "Get a native stack: `gdb -batch -ex run -ex bt --args python train.py`.",
        ],
        references: &[SIGNAL7],
    },
    Entry {
        key: Key::Signal(11),
        name: "SIGSEGV",
        title: "segmentation fault: invalid host memory access, or a stack overflow",
        means: "Native host code accessed memory it may not: a null or wild pointer in an extension, an ABI mismatch \
between an extension or framework and the installed libraries, or a stack overflow, which Linux reports as a \
segmentation fault (deep Python recursion after `sys.setrecursionlimit` was raised).",
        does_not_mean: "It is not a CUDA kernel's illegal memory access (that is a CUDA error reported by the runtime), \
and not a GPU out-of-memory error.",
        rules: &["PY001", "PY002", "OP001", "OP002", "OP003", "CU010", "MF004", "MF005", "MF006"],
        more: &[
            FAULTHANDLER,
            "Get a native stack: `gdb -batch -ex run -ex bt --args python train.py`, or enable core dumps with `ulimit -c unlimited`.",
            "Run custom kernels under `compute-sanitizer --tool memcheck` (with `PYTORCH_NO_CUDA_MEMORY_CACHING=1` for PyTorch).",
        ],
        references: &[SIGNAL7],
    },
    Entry {
        key: Key::Signal(9),
        name: "SIGKILL",
        title: "killed from outside, usually by the out-of-memory killer for host RAM",
        means: "Something killed the process without a chance to clean up. In training that is usually the Linux \
out-of-memory killer, or a container's memory limit (Docker and Kubernetes show `OOMKilled`), because host RAM ran \
out: a whole dataset materialized in memory, DataLoader workers each holding a copy of large Python objects, or \
too much pinned memory.",
        does_not_mean: "It is not a GPU out-of-memory error: running out of GPU memory raises an exception inside the \
process (\"CUDA out of memory\", `ResourceExhaustedError`). It is not a crash of the code itself.",
        rules: &["DS001", "PT012", "TF006", "TF007"],
        more: &[
            "Confirm it: `dmesg | grep -i -E 'killed process|out of memory'` (or `journalctl -k`), or `kubectl describe pod` (`OOMKilled`).",
            "Watch the resident memory of the main process and of each DataLoader worker while the job runs (`top`, `free -m`).",
        ],
        references: &[SIGNAL7],
    },
    Entry {
        key: Key::Signal(7),
        name: "SIGBUS",
        title: "bus error: typically shared memory (/dev/shm) exhausted by DataLoader workers",
        means: "A memory access hit a page that cannot be backed. In PyTorch training inside a container this is \
usually `/dev/shm` being too small for the shared memory through which DataLoader workers pass batches; a memory-mapped \
file truncated while in use does the same. (This is the Linux number; on macOS SIGBUS is 10.)",
        does_not_mean: "It is not a GPU fault, and not a bug in the model code.",
        rules: &["PT012"],
        more: &[
            "Check `df -h /dev/shm`; give the container more (`docker run --shm-size=8g` or `--ipc=host`).",
            "Run once with `num_workers=0`: if the error goes away, it is worker shared memory.",
        ],
        references: &[
            SIGNAL7,
            "PyTorch, multiprocessing best practices and shared memory: https://pytorch.org/docs/stable/notes/multiprocessing.html",
        ],
    },
    Entry {
        key: Key::Signal(4),
        name: "SIGILL",
        title: "illegal instruction: a binary built for CPU features this machine lacks",
        means: "The CPU met an instruction it does not support. Typically a prebuilt wheel compiled for newer CPU \
features (TensorFlow's binaries use AVX) running on an older CPU, a virtual machine or an emulator that hides them.",
        does_not_mean: "It is not a bug in the training code, and not a GPU problem.",
        rules: &[],
        more: &["Check the CPU flags (`grep -o -w avx /proc/cpuinfo | head -1`) against the framework's requirements."],
        references: &[SIGNAL7],
    },
    Entry {
        key: Key::Signal(15),
        name: "SIGTERM",
        title: "asked to stop: a scheduler time limit, an eviction, a preemption, or `docker stop`",
        means: "Something outside asked the process to terminate: a batch scheduler's time limit, a Kubernetes \
eviction or a preemptible instance being reclaimed, `docker stop`, or a user.",
        does_not_mean: "It is not a crash: nothing in the code failed.",
        rules: &[],
        more: &["Look at the scheduler's or the orchestrator's log for why the job was stopped, and checkpoint often enough to resume."],
        references: &[SIGNAL7],
    },
];

/// Parses `-1073740791`, `3221226505`, `0xC0000409`, `C0000409`, `139` and `-11`.
///
/// Hexadecimal needs `0x` unless it contains a letter (`C0000409`). Negative numbers down to
/// -64 are signals (Python's `subprocess`); 129–192 are `128 + signal` (shells, containers);
/// anything that fits 32 bits otherwise is a Windows exit code, signed or unsigned.
pub fn parse(input: &str) -> Result<Code, String> {
    let s = input.trim();
    let bad = || {
        format!("`{input}` is not an exit code: expected a decimal (`-1073740791`, `3221226505`, `139`, `-11`) or a hexadecimal number (`0xC0000409`)")
    };
    let hex = |h: &str| -> Result<Code, String> {
        if h.is_empty() || h.len() > 8 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        u32::from_str_radix(h, 16)
            .map(Code::NtStatus)
            .map_err(|_| bad())
    };
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return hex(h);
    }
    let digits = s
        .strip_prefix('-')
        .or_else(|| s.strip_prefix('+'))
        .unwrap_or(s);
    if digits.is_empty() {
        return Err(bad());
    }
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return if s == digits { hex(s) } else { Err(bad()) };
    }
    let n: i64 = digits.parse().map_err(|_| bad())?;
    let n = if s.starts_with('-') { -n } else { n };
    match n {
        -64..=-1 => Ok(Code::Signal((-n) as u32, SignalSpelling::Negative)),
        129..=192 => Ok(Code::Signal((n - 128) as u32, SignalSpelling::Shell)),
        n if n >= i32::MIN as i64 && n < 0 => Ok(Code::NtStatus(n as i32 as u32)),
        n if (0..=u32::MAX as i64).contains(&n) => Ok(Code::NtStatus(n as u32)),
        _ => Err(format!(
            "`{input}` does not fit in 32 bits, so it is no process exit code"
        )),
    }
}

/// The table entry for a decoded code.
pub fn lookup(code: Code) -> Option<&'static Entry> {
    let key = match code {
        Code::NtStatus(v) => Key::NtStatus(v),
        Code::Signal(n, _) => Key::Signal(n),
    };
    TABLE.iter().find(|e| e.key == key)
}

/// How the code reads in each notation.
pub fn spellings(code: Code) -> String {
    match code {
        Code::NtStatus(v) => format!("{} = {v} = 0x{v:08X}", v as i32),
        Code::Signal(n, SignalSpelling::Shell) => {
            format!("{} = 128 + {n}: killed by signal {n}", 128 + n)
        }
        Code::Signal(n, SignalSpelling::Negative) => {
            format!("-{n}: killed by signal {n} (Python's subprocess return code)")
        }
    }
}

/// The rules of `entry` that this build of gpulint has, and those it has not.
pub fn split_rules(entry: &Entry) -> (Vec<&'static str>, Vec<&'static str>) {
    entry
        .rules
        .iter()
        .partition(|c| registry::find(c).is_some())
}

/// The `gpulint --select ...` command line for `entry`, with the rules this build has.
pub fn command(entry: &Entry) -> Option<String> {
    let (known, _) = split_rules(entry);
    (!known.is_empty()).then(|| format!("gpulint --select {} .", known.join(",")))
}

fn wrap(out: &mut String, text: &str, indent: &str) {
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > 96 {
            let _ = writeln!(out, "{indent}{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{indent}{line}");
    }
}

/// The explanation printed by `gpulint decode`.
pub fn render_text(code: Code, entry: &Entry) -> String {
    let mut out = String::new();
    let kind = match entry.key {
        Key::NtStatus(_) => "Windows NTSTATUS",
        Key::Signal(_) => "POSIX signal",
    };
    let _ = writeln!(out, "{} — {} ({kind})", spellings(code), entry.name);
    let _ = writeln!(out, "{}\n", entry.title);
    out.push_str("What it means:\n");
    wrap(&mut out, entry.means, "  ");
    out.push_str("\nWhat it does not mean:\n");
    wrap(&mut out, entry.does_not_mean, "  ");
    out.push_str("\nRules that look for its causes:\n");
    if entry.rules.is_empty() {
        out.push_str("  none: its causes are outside the source code gpulint reads.\n");
    } else {
        for code in entry.rules {
            match registry::find(code) {
                Some(m) => {
                    let _ = writeln!(out, "  {} {:<32} {}", m.code, m.name, m.summary);
                }
                None => {
                    let _ = writeln!(out, "  {code} (not in this build of gpulint)");
                }
            }
        }
        if let Some(cmd) = command(entry) {
            let _ = writeln!(out, "\n  {cmd}");
        }
    }
    out.push_str("\nHow to learn more:\n");
    for m in entry.more {
        let mut item = String::new();
        wrap(&mut item, m, "    ");
        out.push_str("  - ");
        out.push_str(item.trim_start());
    }
    out.push_str("\nReferences:\n");
    for r in entry.references {
        let _ = writeln!(out, "  - {r}");
    }
    out
}

/// The same as JSON.
pub fn render_json(code: Code, entry: &Entry) -> String {
    let (known, missing) = split_rules(entry);
    let (windows, signal) = match code {
        Code::NtStatus(v) => (
            Some(
                serde_json::json!({"signed": v as i32, "unsigned": v, "hex": format!("0x{v:08X}")}),
            ),
            None,
        ),
        Code::Signal(n, _) => (
            None,
            Some(serde_json::json!({"number": n, "exit_status": 128 + n})),
        ),
    };
    let v = serde_json::json!({
        "input": spellings(code),
        "name": entry.name,
        "kind": match entry.key { Key::NtStatus(_) => "ntstatus", Key::Signal(_) => "signal" },
        "windows": windows,
        "signal": signal,
        "title": entry.title,
        "means": entry.means,
        "does_not_mean": entry.does_not_mean,
        "rules": entry.rules,
        "rules_in_this_build": known,
        "rules_missing_from_this_build": missing,
        "command": command(entry),
        "more": entry.more,
        "references": entry.references,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// The answer for a code that is not in the table.
pub fn unknown_text(code: Code) -> String {
    let mut out = format!(
        "{}: not a code gpulint knows.\n\nKnown codes:\n",
        spellings(code)
    );
    for e in TABLE {
        let spelled = match e.key {
            Key::NtStatus(v) => format!("{} / 0x{v:08X}", v as i32),
            Key::Signal(n) => format!("{} / -{n}", 128 + n),
        };
        let _ = writeln!(out, "  {spelled:<26} {:<28} {}", e.name, e.title);
    }
    if let Code::NtStatus(v) = code {
        if v >= 0xC000_0000 {
            out.push_str(
                "\nIt has the form of a Windows NTSTATUS error; MS-ERREF §2.3.1 lists them all:\n",
            );
            let _ = writeln!(
                out,
                "  {}",
                &MS_ERREF[MS_ERREF.find("https").unwrap_or(0)..]
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_spellings_of_the_fail_fast_code() {
        for s in [
            "-1073740791",
            "3221226505",
            "0xC0000409",
            "0xc0000409",
            "C0000409",
            " 0XC0000409 ",
        ] {
            assert_eq!(parse(s), Ok(Code::NtStatus(0xC000_0409)), "{s}");
            assert_eq!(
                lookup(parse(s).unwrap()).unwrap().name,
                "STATUS_STACK_BUFFER_OVERRUN"
            );
        }
    }

    #[test]
    fn signals() {
        assert_eq!(parse("139"), Ok(Code::Signal(11, SignalSpelling::Shell)));
        assert_eq!(parse("-11"), Ok(Code::Signal(11, SignalSpelling::Negative)));
        assert_eq!(lookup(parse("134").unwrap()).unwrap().name, "SIGABRT");
        assert_eq!(lookup(parse("137").unwrap()).unwrap().name, "SIGKILL");
    }

    #[test]
    fn rejects_what_is_no_exit_code() {
        for s in [
            "",
            "-",
            "0x",
            "0x1234567890",
            "xyz",
            "12ab-",
            "99999999999",
            "-0xC0000409",
        ] {
            assert!(parse(s).is_err(), "{s}");
        }
        // Parsed, but not in the table.
        assert!(lookup(parse("1").unwrap()).is_none());
        assert!(lookup(parse("0xC0000135").unwrap()).is_none());
    }

    #[test]
    fn table_is_consistent() {
        for (i, e) in TABLE.iter().enumerate() {
            assert!(
                TABLE[..i].iter().all(|o| o.key != e.key),
                "duplicate {}",
                e.name
            );
            for code in e.rules {
                let (family, digits) = code.split_at(code.len() - 3);
                assert!(
                    (2..=3).contains(&family.len())
                        && family.chars().all(|c| c.is_ascii_uppercase())
                        && digits.chars().all(|c| c.is_ascii_digit()),
                    "{code}"
                );
            }
            assert!(!e.more.is_empty() && !e.references.is_empty(), "{}", e.name);
            // The command names only rules this build has, so that it runs as printed.
            if let Some(cmd) = command(e) {
                let list = cmd
                    .trim_start_matches("gpulint --select ")
                    .trim_end_matches(" .");
                assert!(
                    list.split(',').all(|c| registry::find(c).is_some()),
                    "{cmd}"
                );
            }
        }
    }
}
