//! Where imports resolve, kept for the folders checked last (see [`super::local_module`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Folders whose answers [`super::local_module`] keeps: a few more than the threads that check
/// files at once, so that memory does not grow with the number of folders checked.
pub(super) const RESOLVED_FOLDERS: usize = 16;

/// Where an import resolves, from the folder of the file that imports it and the root.
pub(super) type Resolved = (Option<(PathBuf, usize)>, Arc<Vec<PathBuf>>);

/// Answers by dotted name, for each of the folders (of the importing file, with the root)
/// asked about last; the oldest folder is dropped first.
#[derive(Default)]
pub(super) struct ResolvedCache {
    folders: std::collections::VecDeque<(PathBuf, PathBuf, HashMap<String, Resolved>)>,
}

impl ResolvedCache {
    pub(super) fn get(&self, dir: &Path, root: &Path, dotted: &str) -> Option<Resolved> {
        self.folders
            .iter()
            .find(|(d, r, _)| d == dir && r == root)
            .and_then(|(_, _, answers)| answers.get(dotted).cloned())
    }

    pub(super) fn insert(&mut self, dir: &Path, root: &Path, dotted: &str, answer: Resolved) {
        let at = match self
            .folders
            .iter()
            .position(|(d, r, _)| d == dir && r == root)
        {
            Some(at) => at,
            None => {
                if self.folders.len() >= RESOLVED_FOLDERS {
                    self.folders.pop_front();
                }
                self.folders
                    .push_back((dir.to_path_buf(), root.to_path_buf(), HashMap::new()));
                self.folders.len() - 1
            }
        };
        self.folders[at].2.insert(dotted.to_string(), answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_answers_are_kept_for_the_last_folders_only() {
        let mut cache = ResolvedCache::default();
        let root = Path::new("/r");
        let answer = |n: usize| -> Resolved { (Some((PathBuf::from("m.py"), n)), Arc::default()) };
        cache.insert(Path::new("/r/a"), root, "m", answer(1));
        cache.insert(Path::new("/r/a"), root, "n", answer(2));
        assert_eq!(
            cache
                .get(Path::new("/r/a"), root, "m")
                .unwrap()
                .0
                .unwrap()
                .1,
            1
        );
        assert_eq!(
            cache
                .get(Path::new("/r/a"), root, "n")
                .unwrap()
                .0
                .unwrap()
                .1,
            2
        );
        // Another root or folder is another question.
        assert!(cache.get(Path::new("/r/a"), Path::new("/s"), "m").is_none());
        assert!(cache.get(Path::new("/r/b"), root, "m").is_none());
        for i in 0..RESOLVED_FOLDERS {
            cache.insert(&PathBuf::from(format!("/r/d{i}")), root, "m", answer(i));
        }
        assert_eq!(cache.folders.len(), RESOLVED_FOLDERS);
        // The oldest folder went first; the newest are all kept.
        assert!(cache.get(Path::new("/r/a"), root, "m").is_none());
        for i in 0..RESOLVED_FOLDERS {
            let dir = PathBuf::from(format!("/r/d{i}"));
            assert_eq!(cache.get(&dir, root, "m").unwrap().0.unwrap().1, i);
        }
    }
}
