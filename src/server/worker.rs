//! Checking open documents off the reader's thread: a queue of targets to check (a target asked
//! for again before its check began is checked once, at its latest version), worker threads,
//! the engines of each configuration, and publishing — only when the version checked is still
//! the document's.

use super::convert;
use super::documents::{as_read, Documents, Snapshot};
use gpulint_linter::engine::{Engine, FileResult, Status};
use gpulint_linter::link::Link;
use gpulint_syntax::Lang;
use gpulint_workspace::discover::display_path;
use gpulint_workspace::settings::{Overrides, Resolved, Resolver, Source};
use lsp_server::{Message, Notification};
use lsp_types::{PublishDiagnosticsParams, Url};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Sends a message to the client.
pub type Send = Box<dyn Fn(Message) + std::marker::Send + Sync>;

/// Locks a mutex, whether or not a thread panicked while holding it (every state it guards
/// stays consistent between statements).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The targets waiting for a check, and those being checked.
#[derive(Default)]
pub struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    pending: VecDeque<Url>,
    queued: HashSet<Url>,
    running: HashSet<Url>,
    stop: bool,
}

impl Queue {
    /// Asks for a check of `uri` (once, however often it is asked before the check begins).
    pub fn push(&self, uri: Url) {
        let mut s = lock(&self.state);
        if s.queued.insert(uri.clone()) {
            s.pending.push_back(uri);
        }
        self.ready.notify_all();
    }

    /// The next target no other worker is checking; `None` once stopped.
    fn take(&self) -> Option<Url> {
        let mut s = lock(&self.state);
        loop {
            if s.stop {
                return None;
            }
            if let Some(i) = s.pending.iter().position(|u| !s.running.contains(u)) {
                let uri = s.pending.remove(i)?;
                s.queued.remove(&uri);
                s.running.insert(uri.clone());
                return Some(uri);
            }
            s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn done(&self, uri: &Url) {
        lock(&self.state).running.remove(uri);
        self.ready.notify_all();
    }

    pub fn stop(&self) {
        lock(&self.state).stop = true;
        self.ready.notify_all();
    }
}

/// An engine with what it needs around it: the folder paths are shown from, and the exclusions.
pub struct Context {
    pub engine: Arc<Engine>,
    pub cwd: PathBuf,
    resolved: Arc<Resolved>,
}

impl Context {
    fn excluded(&self, path: &Path) -> bool {
        self.resolved.excludes.excludes_file(path, &self.cwd)
    }
}

/// The extension builds of a checked Python document.
struct Builds {
    path: PathBuf,
    display: String,
    links: Vec<Link>,
}

/// What the reader and the workers share.
pub struct Shared {
    pub docs: Mutex<Documents>,
    pub queue: Queue,
    /// The workspace folders.
    pub roots: Vec<PathBuf>,
    pub send: Send,
    /// Engines by the folder of the files they check.
    engines: Mutex<HashMap<PathBuf, Result<Arc<Context>, String>>>,
    /// The settings of each folder, as `check` resolves them (made again when a
    /// configuration file changes).
    resolver: Mutex<Option<Arc<Resolver>>>,
    /// The builds of each checked Python document.
    builds: Mutex<HashMap<Url, Builds>>,
}

impl Shared {
    pub fn new(roots: Vec<PathBuf>, send: Send) -> Shared {
        Shared {
            docs: Mutex::default(),
            queue: Queue::default(),
            roots,
            send,
            engines: Mutex::default(),
            resolver: Mutex::default(),
            builds: Mutex::default(),
        }
    }

    /// Forgets every engine (a configuration file changed) and checks everything again.
    pub fn reload(&self) {
        lock(&self.engines).clear();
        lock(&self.resolver).take();
        for uri in lock(&self.docs).targets() {
            self.queue.push(uri);
        }
    }

    /// A closed document: its findings and builds are forgotten.
    pub fn forget(&self, uri: &Url) {
        lock(&self.builds).remove(uri);
    }

    pub fn publish(&self, uri: Url, diagnostics: Vec<lsp_types::Diagnostic>, version: Option<i32>) {
        let params = PublishDiagnosticsParams {
            uri,
            diagnostics,
            version,
        };
        (self.send)(Message::Notification(Notification::new(
            "textDocument/publishDiagnostics".into(),
            params,
        )));
    }

    /// The engine for a file: its configuration is the nearest in the file's own folder or
    /// above, as for `check`.
    fn context(&self, path: &Path) -> Result<Arc<Context>, String> {
        let dir = match path.parent() {
            Some(d) if path.is_absolute() => d.to_path_buf(),
            _ => self
                .roots
                .first()
                .cloned()
                .or_else(|| std::env::current_dir().ok())
                .unwrap_or_default(),
        };
        if let Some(c) = lock(&self.engines).get(&dir) {
            return c.clone();
        }
        let built = self.build(&dir, path).map(Arc::new);
        lock(&self.engines).insert(dir, built.clone());
        built
    }

    /// The resolver of the workspace folders.
    fn resolver(&self) -> Result<Arc<Resolver>, String> {
        if let Some(r) = lock(&self.resolver).as_ref() {
            return Ok(r.clone());
        }
        let cwd = self
            .roots
            .first()
            .cloned()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        let overrides = Overrides {
            paths: self.roots.clone(),
            ..Overrides::default()
        };
        let r = Arc::new(Resolver::new(overrides, Source::Discover, &cwd)?);
        Ok(lock(&self.resolver).get_or_insert(r).clone())
    }

    fn build(&self, dir: &Path, path: &Path) -> Result<Context, String> {
        let resolved = self.resolver()?.for_dir(dir)?;
        // Paths are shown from the workspace folder that holds the file, else from the
        // configuration's folder, else from the file's.
        let cwd = self
            .roots
            .iter()
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .cloned()
            .or_else(|| resolved.config.as_ref().map(|l| l.dir()))
            .unwrap_or_else(|| dir.to_path_buf());
        Ok(Context {
            engine: resolved.engine.clone(),
            cwd,
            resolved,
        })
    }
}

/// A worker: checks targets until the queue stops.
pub fn work(shared: Arc<Shared>) {
    while let Some(uri) = shared.queue.take() {
        // A panic is the end of this check only.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&shared, &uri)));
        shared.queue.done(&uri);
    }
}

/// Checks one target at its current version and publishes the findings, unless the target
/// changed or closed meanwhile (a newer check is then queued, or nothing is wanted).
fn check(shared: &Shared, uri: &Url) {
    let Some(snapshot) = lock(&shared.docs).snapshot(uri) else {
        return;
    };
    let version = snapshot.version();
    let published = match shared.context(snapshot.path()) {
        Err(message) => {
            let diagnostics = vec![convert::config_error(&message)];
            match &snapshot {
                Snapshot::Text(_) => vec![(uri.clone(), diagnostics, Some(version))],
                Snapshot::Notebook(nb) => nb
                    .cells
                    .iter()
                    .filter(|c| c.python)
                    .take(1)
                    .map(|c| (c.uri.clone(), diagnostics.clone(), None))
                    .collect(),
            }
        }
        Ok(ctx) => match &snapshot {
            Snapshot::Text(doc) => {
                let Some(lang) = doc.lang else { return };
                let diagnostics = if ctx.excluded(&doc.path) {
                    Vec::new()
                } else {
                    let result = run(shared, uri, &ctx, &doc.path, as_read(&doc.text).0, lang);
                    convert::text_document(uri, &doc.text, &result.report, &ctx.cwd)
                };
                vec![(uri.clone(), diagnostics, Some(version))]
            }
            Snapshot::Notebook(nb) => if ctx.excluded(&nb.path) {
                convert::notebook(nb, &empty(&nb.path), &ctx.cwd)
            } else {
                let result = run(shared, uri, &ctx, &nb.path, nb.to_ipynb(), Lang::Python);
                convert::notebook(nb, &result.report, &ctx.cwd)
            }
            .into_iter()
            .map(|(u, d)| (u, d, None))
            .collect(),
        },
    };
    let mut docs = lock(&shared.docs);
    if docs.version(uri) != Some(version) {
        return;
    }
    for (u, diagnostics, v) in published {
        docs.published.insert(u.clone(), diagnostics.clone());
        shared.publish(u, diagnostics, v);
    }
}

/// A report with no findings.
fn empty(path: &Path) -> gpulint_diagnostics::FileReport {
    gpulint_diagnostics::FileReport {
        display_path: String::new(),
        source: Arc::new(gpulint_source::SourceFile::new(
            path.to_path_buf(),
            String::new(),
            String::new(),
        )),
        diagnostics: Vec::new(),
        notebook: Some(Arc::default()),
    }
}

/// Checks a text with the engine; a Python file's builds are remembered (and the open kernels
/// they name checked again when they change), a kernel's findings name the open Python files
/// that build it.
fn run(
    shared: &Shared,
    uri: &Url,
    ctx: &Context,
    path: &Path,
    text: String,
    lang: Lang,
) -> FileResult {
    let display = display_path(path, &ctx.cwd);
    let mut result = ctx.engine.check_text(path, display.clone(), text, lang);
    let cwd = std::env::current_dir().unwrap_or_default();
    match lang {
        Lang::Python => {
            let new = Builds {
                path: path.to_path_buf(),
                display,
                links: result.links.clone(),
            };
            let old = lock(&shared.builds).insert(uri.clone(), new);
            let old_links = old.map(|b| b.links).unwrap_or_default();
            if old_links != result.links {
                let named: HashSet<PathBuf> = old_links
                    .iter()
                    .chain(&result.links)
                    .flat_map(|l| &l.sources)
                    .map(|s| real(s, &cwd))
                    .collect();
                let kernels: Vec<Url> = lock(&shared.docs)
                    .text
                    .iter()
                    .filter(|(_, d)| {
                        d.lang == Some(Lang::Cuda) && named.contains(&real(&d.path, &cwd))
                    })
                    .map(|(u, _)| u.clone())
                    .collect();
                for k in kernels {
                    shared.queue.push(k);
                }
            }
        }
        Lang::Cuda if !result.report.diagnostics.is_empty() => {
            let me = real(path, &cwd);
            let builders: Vec<FileResult> = lock(&shared.builds)
                .values()
                .filter(|b| {
                    b.links
                        .iter()
                        .flat_map(|l| &l.sources)
                        .any(|s| real(s, &cwd) == me)
                })
                .map(|b| FileResult {
                    report: gpulint_diagnostics::FileReport {
                        display_path: b.display.clone(),
                        source: Arc::new(gpulint_source::SourceFile::new(
                            b.path.clone(),
                            b.display.clone(),
                            String::new(),
                        )),
                        diagnostics: Vec::new(),
                        notebook: None,
                    },
                    status: Status::Checked,
                    reason: None,
                    partial: false,
                    dependencies: Vec::new(),
                    links: b.links.clone(),
                    calls: Vec::new(),
                })
                .collect();
            if !builders.is_empty() {
                let mut all = vec![result];
                all.extend(builders);
                gpulint_linter::run::annotate(&mut all, &cwd);
                result = all.swap_remove(0);
            }
        }
        _ => {}
    }
    result
}

/// The real path of a file, for comparing paths.
fn real(path: &Path, cwd: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    std::fs::canonicalize(&absolute).unwrap_or(absolute)
}
