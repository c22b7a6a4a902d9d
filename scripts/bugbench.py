#!/usr/bin/env python3
"""Real-bug recall benchmark for gpulint (Python 3 standard library only).

Reads a TSV of bug-fix commits and a TSV of clean files, extracts each version from a
bare git mirror, runs gpulint on it and scores:

  flagged      the parent (buggy) version has a finding of the recorded rule within
               +-CONTEXT lines of the recorded line, in the recorded file;
  fixed-clean  the fix version has no finding of that rule inside the lines the fix
               changed in that file (new side of `git diff -U0 parent fix -- path`),
               +-CONTEXT; when the fix does not touch the file, the recorded line is used;
  negatives    error-severity findings per clean file.

Bugs TSV columns (header line required, extra columns ignored, `#` lines skipped):
  id  repo  fix_commit  parent_commit  path  line  rule  class  note
Negatives TSV columns:
  repo  commit  path

Usage:
  scripts/bugbench.py --bugs bench/cuda_bugs.tsv --negatives bench/cuda_negatives.tsv \\
      --gpulint target/release/gpulint --mirrors /path/to/mirrors [--out summary.md] [--clone]

Mirrors: for repo `owner/name`, a git directory is looked up under --mirrors as
`owner+name`, `owner/name`, `owner+name.git`, `owner/name.git`, `name.git`, or any git
directory (bare, `*.git`, or a work tree's `.git`) up to three levels beneath the first two.
With --clone, a missing repository is cloned with
`git clone --bare --filter=blob:none https://github.com/owner/name` into --mirrors, and a
missing commit is fetched by hash from origin.
"""

import argparse
import collections
import concurrent.futures
import csv
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading

# Files whose parent directory is extracted too: kernels, headers and op glue live side by side.
NATIVE_EXTS = ('.cu', '.cuh', '.cpp', '.cc', '.cxx', '.c', '.h', '.hpp', '.hxx')
# Sources of the parent's other subdirectories extracted with a native file, as gpulint reads
# them (`glue_project`): their extensions, and how many subdirectories.
SIBLING_EXTS = ('.cpp', '.cc', '.cxx', '.cu', '.c')
MAX_SIBLING_DIRS = 16
# Files linted with their whole repository around them.
PYTHON_EXTS = ('.py', '.ipynb')
# The pathspec that stands for the whole tree, and the largest file then extracted (data files,
# weights and images of that size are not source).
WHOLE_TREE = ':/'
MAX_TREE_BLOB = 1 << 20


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def read_tsv(path, required):
    rows = []
    with open(path, newline='', encoding='utf-8') as f:
        lines = [ln for ln in f if ln.strip() and not ln.lstrip().startswith('#')]
    reader = csv.DictReader(lines, delimiter='\t', quoting=csv.QUOTE_NONE)
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        sys.exit(f'{path}: missing column(s) {", ".join(missing)}')
    for row in reader:
        rows.append({k: (v or '').strip() for k, v in row.items() if k})
    return rows


def git(gitdir, *args, check=True, text=True, input=None):
    proc = subprocess.run(['git', '--git-dir', gitdir, *args], capture_output=True,
                          text=text, input=input)
    if check and proc.returncode != 0:
        err = proc.stderr if text else proc.stderr.decode('utf-8', 'replace')
        raise RuntimeError(f'git {" ".join(args)}: {err.strip()}')
    return proc


def is_git_dir(path):
    return (os.path.isfile(os.path.join(path, 'HEAD'))
            and os.path.isdir(os.path.join(path, 'objects'))
            and os.path.isdir(os.path.join(path, 'refs')))


def search_git_dir(base, depth=3):
    """A git directory at `base` or beneath it (bare, *.git, or a work tree's .git)."""
    if is_git_dir(base):
        return base
    if is_git_dir(os.path.join(base, '.git')):
        return os.path.join(base, '.git')
    if depth == 0 or not os.path.isdir(base):
        return None
    try:
        entries = sorted(os.scandir(base), key=lambda e: (not e.name.endswith('.git'), e.name))
    except OSError:
        return None
    for e in entries:
        if e.is_dir(follow_symlinks=True):
            found = search_git_dir(e.path, depth - 1)
            if found:
                return found
    return None


class Mirrors:
    def __init__(self, root, clone):
        self.root = root
        self.clone = clone
        self.cache = {}

    def find(self, repo):
        if repo in self.cache:
            return self.cache[repo]
        owner, _, name = repo.partition('/')
        cands = [os.path.join(self.root, f'{owner}+{name}'), os.path.join(self.root, owner, name),
                 os.path.join(self.root, f'{owner}+{name}.git'),
                 os.path.join(self.root, owner, f'{name}.git'), os.path.join(self.root, f'{name}.git')]
        found = None
        for c in cands:
            if os.path.isdir(c):
                found = search_git_dir(c)
                if found:
                    break
        if not found and self.clone:
            dest = os.path.join(self.root, f'{owner}+{name}.git')
            log(f'cloning {repo} into {dest}')
            os.makedirs(self.root, exist_ok=True)
            proc = subprocess.run(['git', 'clone', '--bare', '--filter=blob:none',
                                   f'https://github.com/{repo}', dest],
                                  capture_output=True, text=True)
            if proc.returncode == 0:
                found = dest
            else:
                log(f'clone of {repo} failed: {proc.stderr.strip()}')
        self.cache[repo] = found
        return found

    def has_commit(self, gitdir, sha):
        if git(gitdir, 'cat-file', '-e', f'{sha}^{{commit}}', check=False).returncode == 0:
            return True
        if self.clone:  # commits of pull requests are not on the default branches
            git(gitdir, 'fetch', '--filter=blob:none', 'origin', sha, check=False)
            return git(gitdir, 'cat-file', '-e', f'{sha}^{{commit}}', check=False).returncode == 0
        return False


def pathspecs_for(gitdir, commit, path):
    """What is extracted to lint `path`. For Python (`.py`, `.ipynb`): the whole repository
    (`:/`), as a user lints a project and its imports reach modules anywhere in it (sibling
    packages, a package installed from a subdirectory); files over MAX_TREE_BLOB are left out.
    For native code: the directory holding `path` (recursively), the files of its parent
    directory and the C/C++/CUDA sources of the parent's other subdirectories; at the top level,
    the top-level files only."""
    if path.lower().endswith(PYTHON_EXTS):
        return [WHOLE_TREE]
    d = os.path.dirname(path)

    def files_in(directory, kind='blob'):
        args = ['ls-tree', commit] + ([f'{directory}/'] if directory else [])
        names = []
        for entry in git(gitdir, *args).stdout.splitlines():
            meta, _, name = entry.partition('\t')
            if meta.split()[1] == kind:
                names.append(name)
        return names

    if not d:
        return files_in('')
    specs = [f'{d}/']
    if path.lower().endswith(NATIVE_EXTS):
        parent = os.path.dirname(d)
        specs += files_in(parent)
        # The C/C++/CUDA sources of the parent's other subdirectories (the first by name), where
        # gpulint looks for the callers of a function that ends with a launch (bindings kept in
        # a `pybind/` folder next to the kernels' one).
        for sib in sorted(files_in(parent, 'tree'))[:MAX_SIBLING_DIRS]:
            if sib != d:
                specs += [f for f in files_in(sib)
                          if f.endswith(SIBLING_EXTS) and f not in specs]
        specs += [h for h in included_headers(gitdir, commit, path)
                  if not h.startswith(f'{d}/') and h not in specs]
    return specs


INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
HEADER_EXTS = ('.h', '.cuh', '.hpp', '.hxx', '.inl')
ROOT_BUILD_FILES = ('setup.py', 'CMakeLists.txt', 'pyproject.toml')
MAX_HEADERS = 32


def included_headers(gitdir, commit, path, depth=3):
    """The project headers `path` includes (quoted includes, a few levels deep), wherever they
    are in the tree, and the top-level build files that name include directories: linting the
    project, gpulint reads them (see crates/gpulint_semantic/src/cuda/headers.rs). An include
    is looked up relative to the including file, else by its path's tail anywhere in the tree
    (an include directory the build names); every match is extracted."""
    names = git(gitdir, 'ls-tree', '-r', '--name-only', '-z', commit).stdout.split('\0')
    headers = [n for n in names if n.lower().endswith(HEADER_EXTS)]
    header_set = set(headers)
    out = [n for n in names if n in ROOT_BUILD_FILES]
    seen, frontier = {path}, [path]
    for _ in range(depth):
        nxt = []
        for f in frontier:
            text = git(gitdir, 'show', f'{commit}:{f}', check=False).stdout or ''
            for inc in INCLUDE_RE.findall(text):
                rel = os.path.normpath(os.path.join(os.path.dirname(f), inc)).replace(os.sep, '/')
                if rel in header_set:
                    found = [rel]
                else:
                    tail = '/'.join(p for p in inc.split('/') if p not in ('.', '..'))
                    found = [h for h in headers if h == tail or h.endswith('/' + tail)]
                for h in found:
                    if h not in seen and len(seen) <= MAX_HEADERS:
                        seen.add(h)
                        out.append(h)
                        nxt.append(h)
        frontier = nxt
    return out


def extract_tree(gitdir, commit, dest):
    """Every regular file of `commit` up to MAX_TREE_BLOB bytes, read through one
    `git cat-file --batch` process."""
    listing = git(gitdir, 'ls-tree', '-r', '-l', '-z', commit).stdout
    wanted = []
    for entry in listing.split('\0'):
        meta, _, name = entry.partition('\t')
        parts = meta.split()
        if len(parts) < 4 or parts[1] != 'blob' or parts[0] == '120000':
            continue
        if not parts[3].isdigit() or int(parts[3]) > MAX_TREE_BLOB:
            continue
        if name.startswith('/') or '..' in name.split('/'):
            continue
        wanted.append((parts[2], name))
    if not wanted:
        return
    proc = git(gitdir, 'cat-file', '--batch', text=False, check=False,
               input=''.join(f'{sha}\n' for sha, _ in wanted).encode())
    out, pos = proc.stdout, 0
    for sha, name in wanted:
        nl = out.find(b'\n', pos)
        if nl < 0:
            break
        header = out[pos:nl].split()
        pos = nl + 1
        if len(header) < 3 or header[1] != b'blob':  # `<sha> missing`
            continue
        size = int(header[2])
        data = out[pos:pos + size]
        pos += size + 1
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, 'wb') as f:
            f.write(data)


def extract(gitdir, commit, specs, dest):
    if specs == [WHOLE_TREE]:
        extract_tree(gitdir, commit, dest)
        return
    proc = git(gitdir, 'archive', '--format=tar', commit, '--', *specs, text=False, check=False)
    if proc.returncode != 0:  # e.g. a mirror that lacks some large blobs: copy file by file
        extract_files(gitdir, commit, specs, dest)
        return
    tar_path = dest + '.tar'
    with open(tar_path, 'wb') as f:
        f.write(proc.stdout)
    with tarfile.open(tar_path) as t:
        members = [m for m in t.getmembers() if m.isfile() or m.isdir()]
        if hasattr(tarfile, 'data_filter'):
            t.extractall(dest, members=members, filter='data')
        else:
            t.extractall(dest, members=members)
    os.unlink(tar_path)


def extract_files(gitdir, commit, specs, dest):
    listing = git(gitdir, 'ls-tree', '-r', '-z', commit, '--', *specs).stdout
    for entry in listing.split('\0'):
        meta, _, name = entry.partition('\t')
        parts = meta.split()
        if len(parts) < 3 or parts[1] != 'blob' or parts[0] == '120000':
            continue
        blob = git(gitdir, 'cat-file', 'blob', parts[2], text=False, check=False)
        if blob.returncode != 0:
            continue
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, 'wb') as f:
            f.write(blob.stdout)


def run_gpulint(gpulint, directory, timeout):
    cmd = [gpulint, '--isolated', '--no-cache', '--exit-zero', '--output-format', 'json', '.']
    try:
        proc = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, 'timeout'
    if proc.returncode not in (0, 1):
        return None, f'exit {proc.returncode}: {proc.stderr.strip()[-300:]}'
    try:
        data = json.loads(proc.stdout or '[]')
    except json.JSONDecodeError as e:
        return None, f'bad json: {e}'
    if isinstance(data, dict):  # tolerate a wrapped form
        data = next((v for v in data.values() if isinstance(v, list)), [])
    # In a notebook, the JSON `line` counts lines of the cells' code; SARIF gives the line of
    # the .ipynb file, which is what the benchmark records. Match the two by fingerprint.
    ipynb_lines = {}
    if any(f.get('cell') is not None for f in data):
        ipynb_lines, err = notebook_file_lines(gpulint, directory, timeout)
        if err:
            return None, err
    findings = collections.defaultdict(list)
    for f in data:
        p = os.path.normpath(str(f.get('path', ''))).replace(os.sep, '/')
        if p.startswith('./'):
            p = p[2:]
        line = int(f.get('line') or 0)
        end_line = int(f.get('end_line') or f.get('line') or 0)
        if f.get('cell') is not None and f.get('fingerprint') in ipynb_lines:
            line = end_line = ipynb_lines[f['fingerprint']]
        findings[p].append({'code': f.get('code'), 'severity': f.get('severity'),
                            'line': line, 'end_line': end_line})
    return findings, None


def notebook_file_lines(gpulint, directory, timeout):
    """Fingerprint -> .ipynb file line of every notebook finding, from gpulint's SARIF output."""
    cmd = [gpulint, '--isolated', '--no-cache', '--exit-zero', '--output-format', 'sarif', '.']
    try:
        proc = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=timeout)
        sarif = json.loads(proc.stdout or '{}')
    except subprocess.TimeoutExpired:
        return None, 'timeout (sarif)'
    except json.JSONDecodeError as e:
        return None, f'bad sarif: {e}'
    out = {}
    for run in sarif.get('runs', []):
        for r in run.get('results', []):
            fp = r.get('partialFingerprints', {}).get('gpulint/v1')
            locs = r.get('locations') or [{}]
            region = locs[0].get('physicalLocation', {}).get('region', {})
            if fp and region.get('startLine'):
                out[fp] = int(region['startLine'])
    return out, None


class Runner:
    """Extracts and lints each (repo, commit, pathspecs) once."""

    def __init__(self, mirrors, gpulint, tmp, timeout):
        self.mirrors, self.gpulint, self.tmp, self.timeout = mirrors, gpulint, tmp, timeout
        self.memo = {}
        self.counter = 0
        self.lock = threading.Lock()
        self.key_locks = collections.defaultdict(threading.Lock)

    def lint(self, repo, commit, path):
        gitdir = self.mirrors.find(repo)
        if not gitdir:
            return None, 'no mirror'
        if not self.mirrors.has_commit(gitdir, commit):
            return None, f'commit {commit[:12]} missing'
        specs = tuple(pathspecs_for(gitdir, commit, path))
        key = (repo, commit, specs)
        with self.lock:
            key_lock = self.key_locks[key]
        with key_lock:
            if key not in self.memo:
                self.memo[key] = self._extract_and_lint(gitdir, commit, specs, path)
        findings, err = self.memo[key]
        if err:
            return None, err
        return findings.get(path, []), None

    def _extract_and_lint(self, gitdir, commit, specs, path):
        with self.lock:
            self.counter += 1
            dest = os.path.join(self.tmp, f'x{self.counter}')
        os.makedirs(dest)
        try:
            extract(gitdir, commit, list(specs), dest)
            if not os.path.isfile(os.path.join(dest, path)):
                return None, 'file absent'
            return run_gpulint(self.gpulint, dest, self.timeout)
        except (RuntimeError, tarfile.TarError, OSError) as e:
            return None, str(e)[:300]
        finally:
            shutil.rmtree(dest, ignore_errors=True)


def changed_new_lines(gitdir, parent, fix, path):
    """New-side line ranges of `git diff -U0 parent fix -- path`."""
    out = git(gitdir, 'diff', '-U0', '--no-color', '--no-ext-diff', parent, fix, '--', path,
              check=False).stdout
    ranges = []
    for m in re.finditer(r'^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@', out, re.M):
        start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        # a pure deletion (count 0) sits between new lines `start` and `start + 1`
        ranges.append((start, start + max(count, 1) - 1) if count else (start, start + 1))
    return ranges


def near(findings, rule, lo, hi, ctx):
    return [f for f in findings if f['code'] == rule and lo - ctx <= f['line'] <= hi + ctx]


def evaluate_bug(bug, runner, ctx):
    res = dict(bug)
    res['status'] = 'ok'
    try:
        line = int(bug['line'])
    except ValueError:
        res['status'] = f'bad line {bug["line"]!r}'
        return res
    parent = bug.get('parent_commit') or f'{bug["fix_commit"]}^'
    pf, err = runner.lint(bug['repo'], parent, bug['path'])
    if err:
        res['status'] = f'parent: {err}'
        return res
    hits = near(pf, bug['rule'], line, line, ctx)
    res['flagged'] = bool(hits)
    res['near_codes'] = sorted({f['code'] for f in pf if abs(f['line'] - line) <= ctx})
    res['file_codes'] = sorted({f['code'] for f in pf})
    ff, err = runner.lint(bug['repo'], bug['fix_commit'], bug['path'])
    if err:
        res['fixed_clean'] = None
        res['fix_note'] = err
        return res
    gitdir = runner.mirrors.find(bug['repo'])
    ranges = changed_new_lines(gitdir, parent, bug['fix_commit'], bug['path']) or [(line, line)]
    res['fixed_clean'] = not any(near(ff, bug['rule'], lo, hi, ctx) for lo, hi in ranges)
    return res


def evaluate_negative(neg, runner):
    res = dict(neg)
    found, err = runner.lint(neg['repo'], neg['commit'], neg['path'])
    if err:
        res['status'] = err
        return res
    res['status'] = 'ok'
    res['errors'] = collections.Counter(f['code'] for f in found if f['severity'] == 'error')
    res['warnings'] = collections.Counter(f['code'] for f in found if f['severity'] == 'warning')
    return res


def pct(a, b):
    return f'{100.0 * a / b:.0f}%' if b else '-'


def md_table(header, rows):
    out = ['| ' + ' | '.join(header) + ' |', '|' + '|'.join('---' for _ in header) + '|']
    out += ['| ' + ' | '.join(str(c) for c in r) + ' |' for r in rows]
    return '\n'.join(out)


def group_table(results, key, label):
    groups = collections.OrderedDict()
    for r in sorted(results, key=lambda r: r[key]):
        groups.setdefault(r[key], []).append(r)
    rows = []
    tot = [0, 0, 0, 0, 0, 0]
    for k, rs in groups.items():
        ok = [r for r in rs if r['status'] == 'ok']
        fl = sum(1 for r in ok if r.get('flagged'))
        fc_known = [r for r in ok if r.get('fixed_clean') is not None]
        fc = sum(1 for r in fc_known if r['fixed_clean'])
        ffl = [r for r in fc_known if r.get('flagged')]
        ffc = sum(1 for r in ffl if r['fixed_clean'])
        rows.append([k, len(ok), fl, pct(fl, len(ok)), pct(fc, len(fc_known)),
                     f'{ffc}/{len(ffl)}' if ffl else '-'])
        tot = [a + b for a, b in zip(tot, [len(ok), fl, fc, len(fc_known), ffc, len(ffl)])]
    rows.append(['**total**', tot[0], tot[1], pct(tot[1], tot[0]), pct(tot[2], tot[3]),
                 f'{tot[4]}/{tot[5]}' if tot[5] else '-'])
    return md_table([label, 'bugs', 'flagged', 'recall', 'fixed-clean', 'fixed-clean of flagged'],
                    rows)


def gpulint_identity(gpulint):
    ver = subprocess.run([gpulint, '--version'], capture_output=True, text=True).stdout.strip()
    commit = ''
    d = os.path.dirname(os.path.abspath(gpulint))
    top = subprocess.run(['git', '-C', d, 'rev-parse', '--show-toplevel'], capture_output=True,
                         text=True).stdout.strip()
    if top:
        commit = subprocess.run(['git', '-C', top, 'rev-parse', '--short', 'HEAD'],
                                capture_output=True, text=True).stdout.strip()
    return ver, commit


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--bugs', required=True)
    ap.add_argument('--negatives')
    ap.add_argument('--gpulint', required=True)
    ap.add_argument('--mirrors', required=True)
    ap.add_argument('--out', help='write the summary as markdown to this file')
    ap.add_argument('--clone', action='store_true',
                    help='clone missing repositories (and fetch missing commits) from GitHub')
    ap.add_argument('--context', type=int, default=3, help='line tolerance (default 3)')
    ap.add_argument('--jobs', type=int, default=2, help='bugs evaluated in parallel (default 2)')
    ap.add_argument('--timeout', type=int, default=600, help='seconds per gpulint run')
    ap.add_argument('--json', help='also write per-bug and per-file results as JSON')
    ap.add_argument('--title', default='gpulint real-bug benchmark')
    args = ap.parse_args()

    gpulint = os.path.abspath(args.gpulint)
    if not os.access(gpulint, os.X_OK):
        sys.exit(f'{gpulint}: not an executable')
    bugs = read_tsv(args.bugs, ['id', 'repo', 'fix_commit', 'path', 'line', 'rule', 'class'])
    negs = read_tsv(args.negatives, ['repo', 'commit', 'path']) if args.negatives else []
    mirrors = Mirrors(os.path.abspath(args.mirrors), args.clone)

    tmp = tempfile.mkdtemp(prefix='bugbench-')
    runner = Runner(mirrors, gpulint, tmp, args.timeout)
    try:
        # Mirror look-ups and clones happen once, before the parallel part.
        for repo in sorted({b['repo'] for b in bugs} | {n['repo'] for n in negs}):
            if not mirrors.find(repo):
                log(f'no mirror for {repo}')
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
            results = list(ex.map(lambda b: evaluate_bug(b, runner, args.context), bugs))
            nres = list(ex.map(lambda n: evaluate_negative(n, runner), negs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ver, commit = gpulint_identity(gpulint)
    ok = [r for r in results if r['status'] == 'ok']
    lines = [f'# {args.title}', '',
             f'- date: {datetime.date.today().isoformat()}',
             f'- gpulint: {ver}' + (f' (commit {commit})' if commit else '') + f', `{args.gpulint}`',
             '- command: `' + ' '.join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:]) + '`',
             f'- bugs: {len(bugs)} listed, {len(ok)} evaluated; negatives: {len(negs)} files; '
             f'tolerance: +-{args.context} lines',
             '',
             '**recall** = share of bugs whose buggy (parent) version has a finding of the recorded '
             'rule within the tolerance of the recorded line; **fixed-clean** = share whose fix '
             'version has no finding of that rule on the lines the fix changed (or, when the fix does '
             'not touch the file, on the recorded line), also given over the flagged bugs only.', '',
             '## Per rule', '', group_table(ok, 'rule', 'rule'), '',
             '## Per class', '', group_table(ok, 'class', 'class'), '']
    if negs:
        nok = [n for n in nres if n['status'] == 'ok']
        with_err = [n for n in nok if sum(n['errors'].values())]
        by_rule = collections.Counter()
        for n in nok:
            by_rule.update(n['errors'])
        lines += ['## Negatives (clean files)', '',
                  md_table(['files', 'files with an error finding', 'error findings', 'by rule'],
                           [[len(nok), f'{len(with_err)} ({pct(len(with_err), len(nok))})',
                             sum(by_rule.values()),
                             ', '.join(f'{k} {v}' for k, v in sorted(by_rule.items())) or '-']]), '']
        if with_err:
            lines += [md_table(['repo', 'path', 'errors', 'warnings'],
                               [[n['repo'], n['path'],
                                 ', '.join(f'{k} {v}' for k, v in sorted(n['errors'].items())),
                                 ', '.join(f'{k} {v}' for k, v in sorted(n['warnings'].items())) or '-']
                                for n in with_err]), '']
        bad = [n for n in nres if n['status'] != 'ok']
        if bad:
            lines += ['Negatives not evaluated: ' + '; '.join(f'{n["repo"]}:{n["path"]} ({n["status"]})'
                                                          for n in bad), '']
    lines += ['## Per bug', '',
              md_table(['id', 'rule', 'class', 'flagged', 'fixed-clean', 'rules within tolerance',
                        'rules anywhere in the file'],
                       [[r['id'], r['rule'], r['class'],
                         ('yes' if r.get('flagged') else 'no') if r['status'] == 'ok' else r['status'],
                         {True: 'yes', False: 'no', None: r.get('fix_note', '-')}.get(r.get('fixed_clean'), '-')
                         if r['status'] == 'ok' else '-',
                         ', '.join(r.get('near_codes', [])) or '-',
                         ', '.join(r.get('file_codes', [])) or '-'] for r in results]), '']
    text = '\n'.join(lines)
    print(text)
    if args.out:
        with open(args.out, 'w', encoding='utf-8') as f:
            f.write(text)
    if args.json:
        def plain(r):
            return {k: (dict(v) if isinstance(v, collections.Counter) else v) for k, v in r.items()}
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump({'bugs': [plain(r) for r in results], 'negatives': [plain(n) for n in nres]},
                      f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
