//! A file to check, as the run holds it until the end: the list of every file found lives
//! as long as the run, so each takes little room. The files of one folder share its path, the
//! file's own name is kept in place when it is short (nearly always), and the path as shown
//! to the user is kept as where it starts in the path.

use compact_str::CompactString;
use gpulint_syntax::Lang;
use std::cmp::Ordering;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// A file to check.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The file's folder, shared by the files of one folder found together; the whole path
    /// when `name` is empty (a path that is not its folder's path joined with its name).
    folder: Arc<Path>,
    /// The file's name in `folder`.
    name: CompactString,
    shown: Shown,
    pub lang: Lang,
}

/// The path as shown to the user. It is nearly always the end of the path itself (the part
/// below the current directory), kept as where that end starts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Shown {
    /// The path's text from this byte on.
    Tail(usize),
    Own(Box<str>),
}

impl Candidate {
    /// The file at `path`, shown to the user as `display`.
    pub fn new(path: PathBuf, display: String, lang: Lang) -> Candidate {
        Candidate::beside(path, display, lang, None)
    }

    /// [`Candidate::new`], sharing the folder of `previous` when the file is in the same one
    /// (the files a walk finds one after the other).
    pub fn beside(
        path: PathBuf,
        display: String,
        lang: Lang,
        previous: Option<&Candidate>,
    ) -> Candidate {
        let shown = match path.to_str() {
            Some(text) if text.ends_with(display.as_str()) => {
                Shown::Tail(text.len() - display.len())
            }
            _ => Shown::Own(display.into_boxed_str()),
        };
        // Split only where joining gives back the same text, so `path()` is the path given.
        let split = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(folder), Some(name)) if folder.join(name).as_os_str() == path.as_os_str() => {
                Some((folder, name))
            }
            _ => None,
        };
        let (folder, name) = match split {
            Some((folder, name)) => {
                let shared = previous
                    .filter(|p| !p.name.is_empty() && p.folder.as_os_str() == folder.as_os_str());
                let folder = match shared {
                    Some(p) => p.folder.clone(),
                    None => Arc::from(folder),
                };
                (folder, CompactString::from(name))
            }
            None => (Arc::from(path.as_path()), CompactString::default()),
        };
        Candidate {
            folder,
            name,
            shown,
            lang,
        }
    }

    /// The file's path, as it was given.
    pub fn path(&self) -> PathBuf {
        if self.name.is_empty() {
            self.folder.to_path_buf()
        } else {
            self.folder.join(self.name.as_str())
        }
    }

    /// The file's folder (empty for a bare name).
    pub fn folder(&self) -> &Path {
        if self.name.is_empty() {
            self.folder.parent().unwrap_or(Path::new(""))
        } else {
            &self.folder
        }
    }

    /// The path as shown to the user.
    pub fn display(&self) -> String {
        match &self.shown {
            Shown::Tail(at) => self
                .path()
                .to_str()
                .and_then(|text| text.get(*at..))
                .unwrap_or_default()
                .to_string(),
            Shown::Own(text) => text.to_string(),
        }
    }

    /// The path's components, as `Path` compares them.
    fn components(&self) -> impl Iterator<Item = Component<'_>> {
        let name = (!self.name.is_empty()).then(|| Component::Normal(self.name.as_ref()));
        self.folder.components().chain(name)
    }
}

/// By path (as `Path` orders paths), then as shown, then by language.
impl Ord for Candidate {
    fn cmp(&self, other: &Candidate) -> Ordering {
        self.components()
            .cmp(other.components())
            .then_with(|| self.shown.cmp(&other.shown))
            .then_with(|| self.lang.cmp(&other.lang))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Candidate) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Candidate) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_shows_the_name_it_was_given() {
        // The usual case: the shown name is the end of the path, and is not stored again.
        let below = Candidate::new(PathBuf::from("./src/a.py"), "src/a.py".into(), Lang::Python);
        assert_eq!(below.display(), "src/a.py");
        assert!(matches!(below.shown, Shown::Tail(2)));
        // A name that is not the end of the path is kept as given.
        let other = Candidate::new(PathBuf::from("/x/a.py"), "../x/a.py".into(), Lang::Python);
        assert_eq!(other.display(), "../x/a.py");
        let dot = Candidate::new(PathBuf::from("a.py"), "a.py".into(), Lang::Python);
        assert_eq!(dot.display(), "a.py");
        assert_eq!(dot.folder(), Path::new(""));
    }

    #[test]
    fn the_path_is_the_one_given_and_files_of_a_folder_share_it() {
        for given in [
            "a/b/c.py", "/x/y.cu", "a.py", "a//b.py", "a/./b.py", "./a.py", "/",
        ] {
            let c = Candidate::new(PathBuf::from(given), given.into(), Lang::Python);
            assert_eq!(c.path().as_os_str(), given, "{given}");
            assert_eq!(c.display(), given);
        }
        let first = Candidate::new(PathBuf::from("d/a.py"), "d/a.py".into(), Lang::Python);
        let next = Candidate::beside(
            PathBuf::from("d/b.py"),
            "d/b.py".into(),
            Lang::Python,
            Some(&first),
        );
        assert!(Arc::ptr_eq(&first.folder, &next.folder));
        assert_eq!(next.folder(), Path::new("d"));
        let other = Candidate::beside(
            PathBuf::from("e/b.py"),
            "e/b.py".into(),
            Lang::Python,
            Some(&next),
        );
        assert!(!Arc::ptr_eq(&other.folder, &next.folder));
        assert_eq!(other.path(), PathBuf::from("e/b.py"));
    }

    #[test]
    fn candidates_sort_as_their_paths_do() {
        let names = [
            "a/b.py", "a/b/c.py", "a/b.pyi", "a.py", "a/b/a.py", "b.py", "a//c.py", "a/c.py",
            "A.py", "a-b/x.py", "a/b.py",
        ];
        let mut by_path: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
        by_path.sort();
        by_path.dedup();
        let mut candidates: Vec<Candidate> = names
            .iter()
            .map(|n| Candidate::new(PathBuf::from(n), n.to_string(), Lang::Python))
            .collect();
        candidates.sort();
        candidates.dedup();
        // `a//c.py` and `a/c.py` are one path to `Path`: one is kept, as with paths.
        let paths: Vec<PathBuf> = candidates.iter().map(Candidate::path).collect();
        assert_eq!(paths, by_path);
    }
}
