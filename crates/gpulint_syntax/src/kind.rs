//! File kinds recognised by name: which dependency manifest format a path is.

use std::path::Path;

/// A manifest format, recognised by file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Requirements,
    Pyproject,
    Conda,
    Dockerfile,
    /// `setup.py`: Python, read through the Python semantic model.
    SetupPy,
    /// A launcher script or `.env` file: only the environment variables it sets.
    Shell,
}

impl Format {
    /// The manifest format of a path, from its name (`setup.py` is Python and not included).
    pub fn of_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?;
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".txt") {
            let in_requirements_dir = path
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|d| d.eq_ignore_ascii_case("requirements"));
            if lower.contains("requirements") || in_requirements_dir {
                return Some(Format::Requirements);
            }
            return None;
        }
        if lower == "pyproject.toml" {
            return Some(Format::Pyproject);
        }
        if (lower.starts_with("environment") || lower.starts_with("conda"))
            && (lower.ends_with(".yml") || lower.ends_with(".yaml"))
        {
            return Some(Format::Conda);
        }
        let docker_suffix = name.strip_prefix("Dockerfile");
        if docker_suffix.is_some_and(|s| s.is_empty() || s.starts_with(['.', '-', '_']))
            || lower.ends_with(".dockerfile")
        {
            return Some(Format::Dockerfile);
        }
        let script = [".sh", ".bash", ".zsh", ".slurm", ".sbatch", ".bat", ".cmd"]
            .iter()
            .any(|e| lower.ends_with(e));
        if script || lower == ".env" || lower.ends_with(".env") {
            return Some(Format::Shell);
        }
        None
    }

    pub fn describe(self) -> &'static str {
        match self {
            Format::Requirements => "requirements file",
            Format::Pyproject => "pyproject.toml",
            Format::Conda => "conda environment file",
            Format::Dockerfile => "Dockerfile",
            Format::SetupPy => "setup.py",
            Format::Shell => "shell script",
        }
    }
}

/// Is this a `setup.py` whose `install_requires` the manifest rules read?
pub fn is_setup_py(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "setup.py")
}
