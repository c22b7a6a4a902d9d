//! The frameworks' tested-configuration tables (`data/compat/*.tsv`), embedded at build time and
//! parsed once. See `data/compat/README.md` for their sources and how to update them.

use pep440_rs::Version;
use std::str::FromStr;
use std::sync::LazyLock;

const TENSORFLOW_TSV: &str = include_str!("../../../data/compat/tensorflow.tsv");
const PYTORCH_TSV: &str = include_str!("../../../data/compat/pytorch.tsv");
const JAX_TSV: &str = include_str!("../../../data/compat/jax.tsv");
const NGC_TENSORFLOW_TSV: &str = include_str!("../../../data/compat/ngc_tensorflow.tsv");

/// A `major.minor` release line (`2.15`, or Python `3.11`).
pub type Minor = (u64, u64);

/// `(3, 11)` → `3.11`.
pub fn minor_str(m: Minor) -> String {
    format!("{}.{}", m.0, m.1)
}

/// Where a TensorFlow row applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TfPlatform {
    Linux,
    MacOs,
    WindowsNative,
}

/// One tested build configuration of TensorFlow.
#[derive(Debug, Clone)]
pub struct TfRow {
    pub platform: TfPlatform,
    /// `tensorflow` or `tensorflow_gpu`, as the table names the package of that row.
    pub package: String,
    /// The release as the table writes it (`2.15.0`).
    pub version: String,
    pub minor: Minor,
    pub python_min: Minor,
    pub python_max: Minor,
    /// cuDNN the release was built and tested with (`8.9`); `None` on CPU-only rows.
    pub cudnn: Option<Version>,
    /// CUDA the release was built and tested with (`12.2`); `None` on CPU-only rows.
    pub cuda: Option<Version>,
    pub native_gpu: bool,
    pub source: String,
}

impl TfRow {
    /// `tensorflow 2.15.0 (Linux): Python 3.9–3.11, CUDA 12.2, cuDNN 8.9`.
    pub fn describe(&self) -> String {
        let platform = match self.platform {
            TfPlatform::Linux => "Linux",
            TfPlatform::MacOs => "macOS",
            TfPlatform::WindowsNative => "native Windows",
        };
        let mut s = format!(
            "{} {} ({platform}): Python {}–{}",
            self.package.replace('_', "-"),
            self.version,
            minor_str(self.python_min),
            minor_str(self.python_max)
        );
        match (&self.cuda, &self.cudnn) {
            (Some(cuda), Some(cudnn)) => s.push_str(&format!(", CUDA {cuda}, cuDNN {cudnn}")),
            _ => s.push_str(", no GPU build"),
        }
        s
    }

    /// CUDA major of the build, if it is a GPU build.
    pub fn cuda_major(&self) -> Option<u64> {
        self.cuda
            .as_ref()
            .and_then(|v| v.release().first().copied())
    }
}

/// One row of the PyTorch release compatibility matrix.
#[derive(Debug, Clone)]
pub struct TorchRow {
    pub minor: Minor,
    pub python: Option<(Minor, Minor)>,
    /// CUDA wheel index tags that exist for this release (`cu118`, `rocm6.1`).
    pub wheel_tags: Vec<String>,
    /// False when the table marks the tag list as expected rather than published.
    pub tags_certain: bool,
    /// The CUDA of the default PyPI wheel on Linux (`cu117`), where the table says it.
    pub pypi_default: Option<String>,
    /// `cuDNN` column as written (`11.8:8.7.0.84;12.1:8.9.2.26`).
    pub cudnn: String,
    pub matrix_source: String,
    pub wheels_source: String,
}

impl TorchRow {
    /// The page that lists this release's wheels (or its matrix row).
    pub fn source(&self) -> &str {
        if self.wheels_source.is_empty() {
            &self.matrix_source
        } else {
            &self.wheels_source
        }
    }
}

/// One milestone of JAX's GPU support.
#[derive(Debug, Clone)]
pub struct JaxRow {
    /// First release the row applies to (`0.4.31`).
    pub from: Version,
    /// As written (`jax 0.4.31`).
    pub label: String,
    /// Minimum cuDNN of the CUDA 12 wheels from this release on, where the row says it.
    pub cudnn_min: Option<Version>,
    pub windows_native_gpu: bool,
    pub source: String,
}

/// All tables.
#[derive(Debug)]
pub struct Tables {
    pub tensorflow: Vec<TfRow>,
    pub pytorch: Vec<TorchRow>,
    pub jax: Vec<JaxRow>,
    /// Rows that could not be read (empty for the embedded tables; a test checks it).
    pub problems: Vec<String>,
}

static TABLES: LazyLock<Tables> =
    LazyLock::new(|| parse_tables(TENSORFLOW_TSV, PYTORCH_TSV, JAX_TSV));

/// The embedded tables.
pub fn tables() -> &'static Tables {
    &TABLES
}

/// A range of NGC TensorFlow container releases (`nvcr.io/nvidia/tensorflow:<YY.MM>-tf2-py3`)
/// and the TensorFlow they ship.
#[derive(Debug, Clone)]
pub struct NgcTfRow {
    /// `1` or `2`: the `-tf1-` or `-tf2-` image.
    pub variant: u8,
    /// First and last container release `(YY, MM)` the row covers.
    pub from: Minor,
    pub to: Minor,
    /// PEP 440 specifier of the TensorFlow the images ship (`==2.4.*`, `>=2.0,<2.4`).
    pub tensorflow: String,
    pub source: String,
}

static NGC_TENSORFLOW: LazyLock<(Vec<NgcTfRow>, Vec<String>)> =
    LazyLock::new(|| parse_ngc(NGC_TENSORFLOW_TSV));

fn parse_ngc(text: &str) -> (Vec<NgcTfRow>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let (h, body) = rows(text);
    for (line, r) in body {
        let variant = match cell(&h, &r, "variant") {
            "tf1" => 1,
            "tf2" => 2,
            other => {
                problems.push(format!(
                    "ngc_tensorflow.tsv:{line}: unknown variant `{other}`"
                ));
                continue;
            }
        };
        let (Some(from), Some(to)) = (
            parse_minor(cell(&h, &r, "from_release")),
            parse_minor(cell(&h, &r, "to_release")),
        ) else {
            problems.push(format!("ngc_tensorflow.tsv:{line}: bad release range"));
            continue;
        };
        let tensorflow = cell(&h, &r, "tensorflow").to_string();
        let source = cell(&h, &r, "source").to_string();
        if tensorflow.is_empty() || source.is_empty() || from > to {
            problems.push(format!("ngc_tensorflow.tsv:{line}: incomplete row"));
            continue;
        }
        out.push(NgcTfRow {
            variant,
            from,
            to,
            tensorflow,
            source,
        });
    }
    (out, problems)
}

/// The TensorFlow an NGC TensorFlow container tag (`20.07-tf2-py3`) ships, when the table
/// covers its release.
pub fn ngc_tensorflow(tag: &str) -> Option<&'static NgcTfRow> {
    let mut parts = tag.split('-');
    let release = parts.next()?;
    let variant = match parts.next()? {
        "tf1" => 1,
        "tf2" => 2,
        _ => return None,
    };
    let (yy, mm) = release.split_once('.')?;
    if yy.len() != 2 || mm.len() != 2 {
        return None;
    }
    let release: Minor = (yy.parse().ok()?, mm.parse().ok()?);
    NGC_TENSORFLOW
        .0
        .iter()
        .find(|r| r.variant == variant && r.from <= release && release <= r.to)
}

/// Rows of a TSV table as (column name → cell) look-ups; `#` lines are comments.
fn rows(text: &str) -> (Vec<&str>, Vec<(usize, Vec<&str>)>) {
    let mut header: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
        if header.is_empty() {
            header = cells;
        } else {
            out.push((i + 1, cells));
        }
    }
    (header, out)
}

fn cell<'a>(header: &[&str], row: &[&'a str], name: &str) -> &'a str {
    header
        .iter()
        .position(|h| *h == name)
        .and_then(|i| row.get(i).copied())
        .unwrap_or("")
}

/// `3.11` → `(3, 11)`; `9` → `(9, 0)`.
pub fn parse_minor(s: &str) -> Option<Minor> {
    let mut it = s.trim().split('.');
    let major = it.next()?.trim().parse().ok()?;
    let minor = match it.next() {
        Some(m) => m.trim().parse().ok()?,
        None => 0,
    };
    Some((major, minor))
}

/// The first dotted number in `s` (`CUDA12 wheels: 8.9.4` → `8.9.4`, `9.8 (<10)` → `9.8`).
pub fn first_version(s: &str) -> Option<Version> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            let text = s[start..i].trim_end_matches('.');
            if let Ok(v) = Version::from_str(text) {
                return Some(v);
            }
        }
        i += 1;
    }
    None
}

fn parse_tables(tf: &str, torch: &str, jax: &str) -> Tables {
    let mut problems = Vec::new();

    let mut tensorflow = Vec::new();
    let (h, body) = rows(tf);
    for (line, r) in body {
        let platform = match cell(&h, &r, "platform") {
            "linux" => TfPlatform::Linux,
            "macos" => TfPlatform::MacOs,
            "windows-native" => TfPlatform::WindowsNative,
            other => {
                problems.push(format!("tensorflow.tsv:{line}: unknown platform `{other}`"));
                continue;
            }
        };
        let version = cell(&h, &r, "tf_version");
        let (Some(minor), Some(python_min), Some(python_max)) = (
            parse_minor(version),
            parse_minor(cell(&h, &r, "python_min")),
            parse_minor(cell(&h, &r, "python_max")),
        ) else {
            problems.push(format!(
                "tensorflow.tsv:{line}: unreadable version or Python range"
            ));
            continue;
        };
        let cuda = first_version(cell(&h, &r, "cuda"));
        let cudnn = first_version(cell(&h, &r, "cudnn"));
        let native_gpu = cell(&h, &r, "native_gpu_support") == "yes";
        if native_gpu && (cuda.is_none() || cudnn.is_none()) {
            problems.push(format!("tensorflow.tsv:{line}: GPU row without CUDA/cuDNN"));
        }
        tensorflow.push(TfRow {
            platform,
            package: cell(&h, &r, "package").to_string(),
            version: version.to_string(),
            minor,
            python_min,
            python_max,
            cudnn,
            cuda,
            native_gpu,
            source: cell(&h, &r, "source").to_string(),
        });
    }

    let mut pytorch = Vec::new();
    let (h, body) = rows(torch);
    for (line, r) in body {
        let minor_text = cell(&h, &r, "torch_minor");
        if minor_text.contains('-') {
            // 1.8.2-LTS has its own index (whl/lts/1.8/…): not a regular release line.
            continue;
        }
        let Some(minor) = parse_minor(minor_text) else {
            problems.push(format!(
                "pytorch.tsv:{line}: unreadable torch_minor `{minor_text}`"
            ));
            continue;
        };
        let python = match (
            parse_minor(cell(&h, &r, "python_min")),
            parse_minor(cell(&h, &r, "python_max")),
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        };
        let raw_tags = cell(&h, &r, "wheel_cuda_index_tags");
        let tags_certain = !raw_tags.contains("expected");
        let wheel_tags: Vec<String> = raw_tags
            .trim_start_matches('(')
            .split(';')
            .filter_map(|t| {
                let t = t.split(['(', ' ']).next().unwrap_or("").trim();
                (!t.is_empty()).then(|| t.to_string())
            })
            .collect();
        if wheel_tags.is_empty() {
            problems.push(format!("pytorch.tsv:{line}: no wheel tags"));
        }
        let pypi_default = Some(cell(&h, &r, "pypi_default_linux_cuda"))
            .filter(|s| s.starts_with("cu"))
            .map(str::to_string);
        pytorch.push(TorchRow {
            minor,
            python,
            wheel_tags,
            tags_certain,
            pypi_default,
            cudnn: cell(&h, &r, "cudnn").to_string(),
            matrix_source: cell(&h, &r, "matrix_source").to_string(),
            wheels_source: cell(&h, &r, "wheels_source")
                .split(" (")
                .next()
                .unwrap_or("")
                .to_string(),
        });
    }

    let mut jax_rows = Vec::new();
    let (h, body) = rows(jax);
    for (line, r) in body {
        let label = cell(&h, &r, "from_version");
        let from = if label.contains("<=") {
            Some(Version::new([0, 0]))
        } else {
            first_version(label)
        };
        let Some(from) = from else {
            problems.push(format!("jax.tsv:{line}: unreadable from_version `{label}`"));
            continue;
        };
        jax_rows.push(JaxRow {
            from,
            label: label.to_string(),
            cudnn_min: first_version(cell(&h, &r, "cudnn_min")),
            windows_native_gpu: cell(&h, &r, "windows_native_gpu").starts_with("yes"),
            source: cell(&h, &r, "source").to_string(),
        });
    }
    jax_rows.sort_by(|a, b| a.from.cmp(&b.from));

    Tables {
        tensorflow,
        pytorch,
        jax: jax_rows,
        problems,
    }
}

impl Tables {
    /// The row of a TensorFlow release line on a platform.
    pub fn tf(&self, platform: TfPlatform, minor: Minor) -> Option<&TfRow> {
        self.tensorflow
            .iter()
            .find(|r| r.platform == platform && r.minor == minor)
    }

    /// Every TensorFlow release line the tables know (Linux rows), oldest first.
    pub fn tf_minors(&self) -> Vec<Minor> {
        let mut v: Vec<Minor> = self
            .tensorflow
            .iter()
            .filter(|r| r.platform == TfPlatform::Linux)
            .map(|r| r.minor)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    pub fn torch(&self, minor: Minor) -> Option<&TorchRow> {
        self.pytorch.iter().find(|r| r.minor == minor)
    }

    /// Every PyTorch release line the table knows, oldest first.
    pub fn torch_minors(&self) -> Vec<Minor> {
        let mut v: Vec<Minor> = self.pytorch.iter().map(|r| r.minor).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The milestone in force for a JAX release, and the minimum cuDNN of its CUDA 12 wheels
    /// (with the row that set it).
    pub fn jax_cudnn_min(&self, version: &Version) -> Option<(&JaxRow, &Version)> {
        self.jax
            .iter()
            .rev()
            .filter(|r| &r.from <= version)
            .find_map(|r| r.cudnn_min.as_ref().map(|c| (r, c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compat_tables_parse_completely() {
        let t = tables();
        assert!(t.problems.is_empty(), "{:#?}", t.problems);
        assert!(t.tensorflow.len() > 80);
        assert!(t.pytorch.len() > 20);
        assert!(t.jax.len() > 10);
        for r in &t.tensorflow {
            assert!(
                r.source.starts_with("https://"),
                "TF {} has no source",
                r.version
            );
            assert!(r.python_min <= r.python_max);
        }
        for r in &t.pytorch {
            assert!(
                r.source().starts_with("https://"),
                "torch {:?} has no source",
                r.minor
            );
        }
        for r in &t.jax {
            assert!(r.source.starts_with("https://"));
            assert!(
                !r.windows_native_gpu,
                "JAX never supported GPU on native Windows"
            );
        }
    }

    #[test]
    fn ngc_tensorflow_containers() {
        let (rows, problems) = &*NGC_TENSORFLOW;
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(rows.iter().all(|r| r.source.starts_with("https://")));
        assert_eq!(
            ngc_tensorflow("20.07-tf2-py3").unwrap().tensorflow,
            ">=2.0,<2.4"
        );
        assert_eq!(
            ngc_tensorflow("20.07-tf1-py3").unwrap().tensorflow,
            "==1.15.*"
        );
        assert_eq!(
            ngc_tensorflow("21.04-tf2-py3").unwrap().tensorflow,
            "==2.4.*"
        );
        // Releases the table does not cover, and tags that are not a tf1/tf2 image.
        assert!(ngc_tensorflow("22.03-tf2-py3").is_none());
        assert!(ngc_tensorflow("19.07-py3").is_none());
        assert!(ngc_tensorflow("latest").is_none());
        assert!(ngc_tensorflow("20.7-tf2-py3").is_none());
    }

    #[test]
    fn known_facts() {
        let t = tables();
        let tf215 = t.tf(TfPlatform::Linux, (2, 15)).unwrap();
        assert_eq!(tf215.cuda, Some(Version::from_str("12.2").unwrap()));
        assert_eq!(tf215.cudnn, Some(Version::from_str("8.9").unwrap()));
        assert_eq!((tf215.python_min, tf215.python_max), ((3, 9), (3, 11)));
        assert!(t.tf(TfPlatform::WindowsNative, (2, 10)).unwrap().native_gpu);
        assert!(!t.tf(TfPlatform::WindowsNative, (2, 11)).unwrap().native_gpu);
        let torch24 = t.torch((2, 4)).unwrap();
        assert_eq!(torch24.wheel_tags, ["cu118", "cu121", "cu124", "rocm6.1"]);
        assert!(t
            .torch((2, 8))
            .unwrap()
            .wheel_tags
            .iter()
            .all(|t| t != "cu118"));
        assert!(!t.torch((2, 11)).unwrap().tags_certain);
        assert_eq!(
            t.torch((2, 0)).unwrap().pypi_default.as_deref(),
            Some("cu117")
        );
        assert_eq!(t.torch((1, 8)).unwrap().wheel_tags[0], "cu101");
        let v = |s: &str| Version::from_str(s).unwrap();
        assert_eq!(t.jax_cudnn_min(&v("0.6.2")).unwrap().1, &v("9.8"));
        assert_eq!(t.jax_cudnn_min(&v("0.5.0")).unwrap().1, &v("9.1"));
        assert_eq!(t.jax_cudnn_min(&v("0.4.20")).unwrap().1, &v("8.9.4"));
        assert!(t.jax_cudnn_min(&v("0.4.10")).is_none());
    }
}
