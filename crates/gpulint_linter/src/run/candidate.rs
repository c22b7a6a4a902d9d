//! A file to check, as the run holds it until the end: the list of every file found lives
//! as long as the run, so each takes little room. The files of one folder share its path, the
//! file's own name is kept in place when it is short (nearly always), and the path as shown
//! to the user is kept as where it starts in the path.

use compact_str::CompactString;
use gpulint_syntax::Lang;
use std::cmp::Ordering;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// A file to check (40 bytes, and the name's text when it is long).
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The file's folder, shared by the files of one folder found together.
    folder: Arc<Folder>,
    /// The file's name in `folder`; empty when the path is not its folder's path joined with
    /// a name (`folder.path` is then the whole path).
    name: CompactString,
    /// Where the path as shown starts in the path's text; [`OWN`] when it is not the end of
    /// the path (it is then `folder.shown`).
    tail: u32,
    pub lang: Lang,
}

/// The folder of one or more files: the folder's path, or the whole path of a file that is not
/// a folder's path joined with a name; and the name shown to the user of the one file that is
/// not shown by the end of its path (rare: such a file never shares its folder).
#[derive(Debug)]
struct Folder {
    path: Box<Path>,
    shown: Option<Box<str>>,
}

/// [`Candidate::tail`] of a file shown by a name of its own.
const OWN: u32 = u32::MAX;

/// The path as shown to the user, as candidates compare it.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Shown<'a> {
    /// The path's text from this byte on.
    Tail(u32),
    Own(&'a str),
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
        let tail = match path.to_str() {
            Some(text) if text.ends_with(display.as_str()) => {
                u32::try_from(text.len() - display.len())
                    .ok()
                    .filter(|&at| at != OWN)
            }
            _ => None,
        };
        let own = tail.is_none().then(|| display.into_boxed_str());
        // Split only where joining gives back the same text, so `path()` is the path given.
        let split = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(folder), Some(name)) if folder.join(name).as_os_str() == path.as_os_str() => {
                Some((folder, name))
            }
            _ => None,
        };
        let (folder, name) = match split {
            Some((folder, name)) => {
                let shared = previous.filter(|p| {
                    own.is_none()
                        && p.folder.shown.is_none()
                        && !p.name.is_empty()
                        && p.folder.path.as_os_str() == folder.as_os_str()
                });
                let folder = match shared {
                    Some(p) => p.folder.clone(),
                    None => Arc::new(Folder {
                        path: folder.into(),
                        shown: own,
                    }),
                };
                (folder, CompactString::from(name))
            }
            None => {
                let folder = Folder {
                    path: path.into_boxed_path(),
                    shown: own,
                };
                (Arc::new(folder), CompactString::default())
            }
        };
        Candidate {
            folder,
            name,
            tail: tail.unwrap_or(OWN),
            lang,
        }
    }

    /// The file's path, as it was given.
    pub fn path(&self) -> PathBuf {
        if self.name.is_empty() {
            self.folder.path.to_path_buf()
        } else {
            self.folder.path.join(self.name.as_str())
        }
    }

    /// The file's folder (empty for a bare name).
    pub fn folder(&self) -> &Path {
        if self.name.is_empty() {
            self.folder.path.parent().unwrap_or(Path::new(""))
        } else {
            &self.folder.path
        }
    }

    /// The path as shown to the user.
    pub fn display(&self) -> String {
        match self.shown() {
            Shown::Tail(at) => self
                .path()
                .to_str()
                .and_then(|text| text.get(at as usize..))
                .unwrap_or_default()
                .to_string(),
            Shown::Own(text) => text.to_string(),
        }
    }

    fn shown(&self) -> Shown<'_> {
        match &self.folder.shown {
            Some(text) if self.tail == OWN => Shown::Own(text),
            _ => Shown::Tail(self.tail),
        }
    }

    /// The path's components, as `Path` compares them.
    fn components(&self) -> impl Iterator<Item = Component<'_>> {
        let name = (!self.name.is_empty()).then(|| Component::Normal(self.name.as_ref()));
        self.folder.path.components().chain(name)
    }
}

/// By path (as `Path` orders paths), then as shown, then by language.
impl Ord for Candidate {
    fn cmp(&self, other: &Candidate) -> Ordering {
        self.components()
            .cmp(other.components())
            .then_with(|| self.shown().cmp(&other.shown()))
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
        assert!(matches!(below.shown(), Shown::Tail(2)));
        assert_eq!(std::mem::size_of::<Candidate>(), 40);
        // A name that is not the end of the path is kept as given.
        let other = Candidate::new(PathBuf::from("/x/a.py"), "../x/a.py".into(), Lang::Python);
        assert_eq!(other.display(), "../x/a.py");
        assert_eq!(other.path(), PathBuf::from("/x/a.py"));
        // Nor does the next file of its folder take that name.
        let next = Candidate::beside(
            PathBuf::from("/x/b.py"),
            "/x/b.py".into(),
            Lang::Python,
            Some(&other),
        );
        assert_eq!(next.display(), "/x/b.py");
        let own_next = Candidate::beside(
            PathBuf::from("/x/c.py"),
            "../x/c.py".into(),
            Lang::Python,
            Some(&next),
        );
        assert_eq!(own_next.display(), "../x/c.py");
        assert_eq!(next.display(), "/x/b.py");
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
