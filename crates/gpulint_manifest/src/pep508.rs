//! Requirement specifiers as projects write them (PEP 508, read tolerantly): a name, extras, a
//! version specifier (PEP 440, through `pep440_rs`), a `+local` label such as `+cu118`, and an
//! environment marker evaluated per platform with three-valued logic.

use super::Platform;
use pep440_rs::{Version, VersionSpecifiers};
use std::ops::Range;
use std::str::FromStr;

/// The versions a requirement admits.
#[derive(Debug, Clone)]
pub enum Spec {
    /// No constraint.
    Any,
    Versions(VersionSpecifiers),
    /// Written, but not understood (a conda `|`, a typo): rules stay silent.
    Unknown,
}

impl Spec {
    /// Does this spec admit `v`? `None` when the spec is not understood.
    pub fn admits(&self, v: &Version) -> Option<bool> {
        match self {
            Spec::Any => Some(true),
            Spec::Versions(s) => Some(s.contains(v)),
            Spec::Unknown => None,
        }
    }

    /// Is there an upper bound (`==`, `<`, `<=`, `~=`, `==X.*`)?
    pub fn bounded_above(&self) -> bool {
        use pep440_rs::Operator::*;
        match self {
            Spec::Versions(s) => s.iter().any(|c| {
                matches!(
                    c.operator(),
                    Equal | EqualStar | ExactEqual | LessThan | LessThanEqual | TildeEqual
                )
            }),
            _ => false,
        }
    }

    /// Is there a lower bound?
    pub fn bounded_below(&self) -> bool {
        use pep440_rs::Operator::*;
        match self {
            Spec::Versions(s) => s.iter().any(|c| {
                matches!(
                    c.operator(),
                    Equal | EqualStar | ExactEqual | GreaterThan | GreaterThanEqual | TildeEqual
                )
            }),
            _ => false,
        }
    }

    /// The upper bound, as a version that is excluded or included (`<4` → 4).
    pub fn upper_bound(&self) -> Option<Version> {
        use pep440_rs::Operator::*;
        match self {
            Spec::Versions(s) => s
                .iter()
                .filter(|c| matches!(c.operator(), LessThan | LessThanEqual))
                .map(|c| c.version().clone())
                .min(),
            _ => None,
        }
    }
}

/// Parses a comma-separated specifier list, taking a `+local` label off `==` clauses and
/// forgiving common slips (`>=2.7.*`). Returns the spec and the local label (lower case).
pub fn parse_specifiers(text: &str) -> (Spec, Option<String>) {
    let t = text.trim();
    let t = t
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(t)
        .trim();
    if t.is_empty() {
        return (Spec::Any, None);
    }
    let mut local = None;
    let mut clauses = Vec::new();
    for clause in t.split(',') {
        let mut c = clause.trim().to_string();
        if c.is_empty() {
            continue;
        }
        if let Some(plus) = c.find('+') {
            let label = c[plus + 1..].trim().to_ascii_lowercase();
            if !label.is_empty() {
                local = Some(label);
            }
            c.truncate(plus);
        }
        let op_end = c
            .find(|ch: char| !matches!(ch, '=' | '<' | '>' | '!' | '~'))
            .unwrap_or(c.len());
        let op = &c[..op_end];
        if op.is_empty() {
            return (Spec::Unknown, local);
        }
        if c.ends_with(".*") && !matches!(op, "==" | "!=") {
            c.truncate(c.len() - 2);
        }
        clauses.push(c);
    }
    match VersionSpecifiers::from_str(&clauses.join(",")) {
        Ok(s) if s.is_empty() => (Spec::Any, local),
        Ok(s) => (Spec::Versions(s), local),
        Err(_) => (Spec::Unknown, local),
    }
}

/// `Tensorflow_GPU` → `tensorflow-gpu` (PEP 503 normalisation).
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
            continue;
        }
        if sep && !out.is_empty() {
            out.push('-');
        }
        sep = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A requirement string, read.
#[derive(Debug, Clone)]
pub struct Req {
    pub name: String,
    /// Byte range of the name in the input.
    pub name_range: Range<usize>,
    pub extras: Vec<String>,
    pub spec: Spec,
    pub local: Option<String>,
    pub marker: Option<Marker>,
    /// Byte range of the requirement up to (not including) its marker.
    pub range: Range<usize>,
    /// A direct reference (`name @ url`).
    pub url: bool,
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
}

/// Reads one requirement (`torch[extra]>=2.1,<2.3; sys_platform == "linux"`). `None` for text
/// that is not a requirement of a named package (a path, a URL, an option).
pub fn parse_requirement(s: &str) -> Option<Req> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let name_start = i;
    if i >= b.len() || !b[i].is_ascii_alphanumeric() {
        return None;
    }
    while i < b.len() && is_name_char(b[i]) {
        i += 1;
    }
    let name_end = i;
    let raw_name = &s[name_start..name_end];
    if raw_name.ends_with('.') || raw_name.ends_with('-') {
        return None;
    }
    let rest = &s[name_end..];
    // Paths, URLs and archives are not named requirements.
    if rest.starts_with(':') || rest.starts_with('/') || rest.starts_with('\\') {
        return None;
    }
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    i = skip_ws(i);
    let mut extras = Vec::new();
    if i < b.len() && b[i] == b'[' {
        let close = s[i..].find(']')? + i;
        extras = s[i + 1..close]
            .split(',')
            .map(|e| normalize(e.trim()))
            .filter(|e| !e.is_empty())
            .collect();
        i = skip_ws(close + 1);
    }
    let marker_at = s[i..].find(';').map(|p| p + i);
    let body_end = marker_at.unwrap_or(b.len());
    let body = &s[i..body_end];
    let (spec, local, url) = if let Some(u) = body.trim_start().strip_prefix('@') {
        if u.trim().is_empty() {
            return None;
        }
        (Spec::Any, None, true)
    } else {
        let first = body.trim_start().bytes().next();
        if first.is_some_and(|c| !matches!(c, b'=' | b'<' | b'>' | b'!' | b'~' | b'(')) {
            // `name 2.4` or stray words: not PEP 508.
            return None;
        }
        let (spec, local) = parse_specifiers(body);
        (spec, local, false)
    };
    let marker = marker_at.map(|m| Marker::parse(&s[m + 1..]));
    let end = s[..body_end].trim_end().len();
    Some(Req {
        name: normalize(raw_name),
        name_range: name_start..name_end,
        extras,
        spec,
        local,
        marker,
        range: name_start..end.max(name_end),
        url,
    })
}

/// What a marker compares.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Var(String),
    Str(String),
}

/// An environment marker: `sys_platform == "win32" and python_version < "3.11"`.
#[derive(Debug, Clone)]
pub enum Marker {
    All(Vec<Marker>),
    Any(Vec<Marker>),
    Compare(Operand, String, Operand),
    /// Not understood: evaluates to "unknown".
    Invalid,
}

/// What markers are evaluated against. Unknown variables make a comparison unknown.
#[derive(Debug, Clone, Copy)]
pub struct MarkerEnv {
    pub platform: Platform,
    pub python: Option<(u64, u64)>,
}

const MAX_MARKER_DEPTH: usize = 16;

impl Marker {
    pub fn parse(text: &str) -> Marker {
        let tokens = match tokenize(text) {
            Some(t) => t,
            None => return Marker::Invalid,
        };
        let mut p = MarkerParser { tokens, pos: 0 };
        match p.or_expr(0) {
            Some(m) if p.pos == p.tokens.len() => m,
            _ => Marker::Invalid,
        }
    }

    /// Three-valued evaluation: `Some(true)`, `Some(false)`, or `None` when it depends on
    /// something not known here.
    pub fn eval(&self, env: &MarkerEnv) -> Option<bool> {
        match self {
            Marker::All(parts) => {
                let mut unknown = false;
                for p in parts {
                    match p.eval(env) {
                        Some(false) => return Some(false),
                        None => unknown = true,
                        Some(true) => {}
                    }
                }
                (!unknown).then_some(true)
            }
            Marker::Any(parts) => {
                let mut unknown = false;
                for p in parts {
                    match p.eval(env) {
                        Some(true) => return Some(true),
                        None => unknown = true,
                        Some(false) => {}
                    }
                }
                (!unknown).then_some(false)
            }
            Marker::Compare(l, op, r) => {
                let lv = operand_value(l, env)?;
                let rv = operand_value(r, env)?;
                let is_version = [l, r]
                    .iter()
                    .any(|o| matches!(o, Operand::Var(v) if v == "python_version"));
                compare(&lv, op, &rv, is_version)
            }
            Marker::Invalid => None,
        }
    }

    /// Does the marker compare this variable (`python_version`)?
    pub fn mentions(&self, var: &str) -> bool {
        let mut stack = vec![self];
        while let Some(m) = stack.pop() {
            match m {
                Marker::All(p) | Marker::Any(p) => stack.extend(p.iter()),
                Marker::Compare(l, _, r) => {
                    if [l, r]
                        .iter()
                        .any(|o| matches!(o, Operand::Var(v) if v == var))
                    {
                        return true;
                    }
                }
                Marker::Invalid => return true,
            }
        }
        false
    }

    /// Does the marker name a Windows platform (`sys_platform == "win32"`,
    /// `platform_system == "Windows"`, `os_name == "nt"`)?
    pub fn names_windows(&self) -> bool {
        let mut stack = vec![self];
        while let Some(m) = stack.pop() {
            match m {
                Marker::All(p) | Marker::Any(p) => stack.extend(p.iter()),
                Marker::Compare(l, _, r) => {
                    for o in [l, r] {
                        if let Operand::Str(s) = o {
                            if matches!(s.as_str(), "win32" | "Windows" | "nt" | "cygwin") {
                                return true;
                            }
                        }
                    }
                }
                Marker::Invalid => {}
            }
        }
        false
    }
}

fn operand_value(o: &Operand, env: &MarkerEnv) -> Option<String> {
    match o {
        Operand::Str(s) => Some(s.clone()),
        Operand::Var(v) => match v.as_str() {
            "sys_platform" | "sys.platform" => Some(
                match env.platform {
                    Platform::Linux => "linux",
                    Platform::Windows => "win32",
                    Platform::MacOs => "darwin",
                }
                .into(),
            ),
            "platform_system" | "platform.system" => Some(
                match env.platform {
                    Platform::Linux => "Linux",
                    Platform::Windows => "Windows",
                    Platform::MacOs => "Darwin",
                }
                .into(),
            ),
            "os_name" | "os.name" => Some(
                match env.platform {
                    Platform::Windows => "nt",
                    _ => "posix",
                }
                .into(),
            ),
            "python_version" => env.python.map(|(a, b)| format!("{a}.{b}")),
            _ => None,
        },
    }
}

fn compare(l: &str, op: &str, r: &str, version: bool) -> Option<bool> {
    match op {
        "in" => return Some(r.contains(l)),
        "not in" => return Some(!r.contains(l)),
        _ => {}
    }
    if version {
        let spec = VersionSpecifiers::from_str(&format!("{op}{r}")).ok()?;
        let v = Version::from_str(l).ok()?;
        return Some(spec.contains(&v));
    }
    match op {
        "==" | "===" => Some(l == r),
        "!=" => Some(l != r),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Var(String),
    Str(String),
    Op(String),
    Open,
    Close,
    And,
    Or,
}

fn tokenize(text: &str) -> Option<Vec<Token>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'(' {
            out.push(Token::Open);
            i += 1;
        } else if c == b')' {
            out.push(Token::Close);
            i += 1;
        } else if c == b'"' || c == b'\'' {
            let end = text[i + 1..].find(c as char)? + i + 1;
            out.push(Token::Str(text[i + 1..end].to_string()));
            i = end + 1;
        } else if matches!(c, b'=' | b'!' | b'<' | b'>' | b'~') {
            let start = i;
            while i < b.len() && matches!(b[i], b'=' | b'!' | b'<' | b'>' | b'~') {
                i += 1;
            }
            out.push(Token::Op(text[start..i].to_string()));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            let word = &text[start..i];
            match word {
                "and" => out.push(Token::And),
                "or" => out.push(Token::Or),
                "in" => out.push(Token::Op("in".into())),
                "not" => {
                    // `not in`
                    let rest = text[i..].trim_start();
                    if !rest.starts_with("in") {
                        return None;
                    }
                    i = text.len() - rest.len() + 2;
                    out.push(Token::Op("not in".into()));
                }
                _ => out.push(Token::Var(word.to_string())),
            }
        } else {
            return None;
        }
    }
    Some(out)
}

struct MarkerParser {
    tokens: Vec<Token>,
    pos: usize,
}

impl MarkerParser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn or_expr(&mut self, depth: usize) -> Option<Marker> {
        let mut parts = vec![self.and_expr(depth)?];
        while self.peek() == Some(&Token::Or) {
            self.pos += 1;
            parts.push(self.and_expr(depth)?);
        }
        Some(if parts.len() == 1 {
            parts.pop()?
        } else {
            Marker::Any(parts)
        })
    }

    fn and_expr(&mut self, depth: usize) -> Option<Marker> {
        let mut parts = vec![self.atom(depth)?];
        while self.peek() == Some(&Token::And) {
            self.pos += 1;
            parts.push(self.atom(depth)?);
        }
        Some(if parts.len() == 1 {
            parts.pop()?
        } else {
            Marker::All(parts)
        })
    }

    fn atom(&mut self, depth: usize) -> Option<Marker> {
        if depth > MAX_MARKER_DEPTH {
            return None;
        }
        if self.peek() == Some(&Token::Open) {
            self.pos += 1;
            let inner = self.or_expr(depth + 1)?;
            if self.peek() != Some(&Token::Close) {
                return None;
            }
            self.pos += 1;
            return Some(inner);
        }
        let l = self.operand()?;
        let op = match self.tokens.get(self.pos)? {
            Token::Op(o) => o.clone(),
            _ => return None,
        };
        self.pos += 1;
        let r = self.operand()?;
        Some(Marker::Compare(l, op, r))
    }

    fn operand(&mut self) -> Option<Operand> {
        let t = self.tokens.get(self.pos)?.clone();
        self.pos += 1;
        match t {
            Token::Var(v) => Some(Operand::Var(v)),
            Token::Str(s) => Some(Operand::Str(s)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(platform: Platform) -> MarkerEnv {
        MarkerEnv {
            platform,
            python: None,
        }
    }

    #[test]
    fn requirements() {
        let r = parse_requirement("tensorflow[and-cuda]>=2.14,<2.16 ; sys_platform == 'linux'")
            .unwrap();
        assert_eq!(r.name, "tensorflow");
        assert_eq!(r.extras, ["and-cuda"]);
        assert!(r
            .spec
            .admits(&Version::from_str("2.15.1").unwrap())
            .unwrap());
        assert!(!r
            .spec
            .admits(&Version::from_str("2.16.0").unwrap())
            .unwrap());
        assert_eq!(r.marker.unwrap().eval(&env(Platform::Windows)), Some(false));
        let r = parse_requirement("torch==2.1.0+cu118").unwrap();
        assert_eq!(r.local.as_deref(), Some("cu118"));
        assert!(r.spec.admits(&Version::from_str("2.1.0").unwrap()).unwrap());
        let r = parse_requirement("Tensorflow_GPU >= 1.14.0").unwrap();
        assert_eq!(r.name, "tensorflow-gpu");
        let r = parse_requirement("tensorflow>=2.7.*").unwrap();
        assert!(r.spec.admits(&Version::from_str("2.8.0").unwrap()).unwrap());
        let r = parse_requirement("jaxlib==0.4.13+cuda11.cudnn82").unwrap();
        assert_eq!(r.local.as_deref(), Some("cuda11.cudnn82"));
        assert!(parse_requirement("./local/pkg").is_none());
        assert!(parse_requirement("git+https://github.com/x/y").is_none());
        assert!(parse_requirement("https://example.com/x.whl").is_none());
        assert!(parse_requirement("tensorflow 2.4").is_none());
        let r = parse_requirement("pkg @ https://example.com/pkg.whl").unwrap();
        assert!(r.url);
        let r = parse_requirement("torch").unwrap();
        assert!(matches!(r.spec, Spec::Any));
        assert_eq!(r.range, 0..5);
    }

    #[test]
    fn markers() {
        let m = Marker::parse(r#"platform_system == "Windows" and python_version >= "3.9""#);
        assert_eq!(m.eval(&env(Platform::Linux)), Some(false));
        assert_eq!(m.eval(&env(Platform::Windows)), None);
        let py = MarkerEnv {
            platform: Platform::Windows,
            python: Some((3, 10)),
        };
        assert_eq!(m.eval(&py), Some(true));
        assert!(m.names_windows());
        let m = Marker::parse("(os_name == 'nt' or sys_platform == 'darwin') and extra == 'gpu'");
        assert_eq!(m.eval(&env(Platform::Linux)), Some(false));
        assert_eq!(m.eval(&env(Platform::Windows)), None);
        assert!(matches!(Marker::parse("sys_platform ==="), Marker::Invalid));
        let deep = format!(
            "{}sys_platform == 'linux'{}",
            "(".repeat(100),
            ")".repeat(100)
        );
        assert!(matches!(Marker::parse(&deep), Marker::Invalid));
        let m = Marker::parse("'linux' in sys_platform");
        assert_eq!(m.eval(&env(Platform::Linux)), Some(true));
        let m = Marker::parse("sys_platform not in 'win32 cygwin'");
        assert_eq!(m.eval(&env(Platform::Windows)), Some(false));
    }
}
