//! The prose docs (README.md, CHANGELOG.md, docs/*.md) kept true to the tree: every
//! relative link and `docs/<page>.md#anchor` reference resolves to a file and a
//! heading; every `cargo ... -p <package>` names a workspace package, and its
//! `--example`, `--test` and `--bench` exist in that package; every `OPAL_*`
//! variable a page mentions is read somewhere in the code; README keeps the two
//! commands `.ci/run` depends on; no page numbers its prose by development step.
//!
//! Owns: these checks over the Markdown files. Must not: build or run the commands
//! it checks (that is what the rest of the test suite does).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The Markdown files whose prose is checked, relative to the root.
fn pages() -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("README.md"), PathBuf::from("CHANGELOG.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("readable docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            p.strip_prefix(root())
                .expect("under the root")
                .to_path_buf()
        })
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

fn read(rel: &Path) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
}

/// GitHub's anchor for a heading: lower-cased, spaces to `-`, other punctuation
/// (backticks, commas, parentheses, apostrophes, dots) dropped.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c.to_lowercase().next().unwrap_or(c)),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside fenced code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#').trim()));
        }
    }
    out
}

/// Checks one reference `target` (a path relative to `from`'s directory, with an
/// optional `#anchor`), returning a problem when it does not resolve.
fn check_ref(from: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else {
        from.parent().unwrap_or(Path::new("")).join(path)
    };
    let abs = root().join(&file);
    if !abs.exists() {
        return Some(format!(
            "{}: link to missing {}",
            from.display(),
            file.display()
        ));
    }
    let anchor = anchor?;
    if abs.extension().is_some_and(|x| x == "md") && !anchors(&read(&file)).contains(anchor) {
        return Some(format!(
            "{}: no heading for #{anchor} in {}",
            from.display(),
            file.display()
        ));
    }
    None
}

#[test]
fn links_and_page_references_resolve() {
    let mut problems = Vec::new();
    for page in pages() {
        let text = read(&page);
        // Markdown links: ](target)
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            if let Some(end) = rest.find(')') {
                problems.extend(check_ref(&page, &rest[..end]));
            }
        }
        // Plain references such as docs/using.md#running-exported-models, taken from
        // the root (README's wording) or, inside docs/, from docs/ itself.
        for (i, _) in text.match_indices("docs/") {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || "/._-#".contains(c)))
                .unwrap_or(rest.len());
            let target = rest[..end].trim_end_matches('.');
            if !target.contains(".md")
                || (i > 0 && text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '/'))
            {
                continue;
            }
            problems.extend(check_ref(Path::new("README.md"), target));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A workspace package: its directory and its examples, tests and benches.
struct Package {
    dir: PathBuf,
    manifest: String,
}

impl Package {
    fn has_target(&self, kind: &str, folder: &str, name: &str) -> bool {
        let declared = format!("[[{kind}]]\nname = \"{name}\"");
        self.manifest.contains(&declared)
            || self.dir.join(folder).join(format!("{name}.rs")).exists()
    }
}

fn packages() -> BTreeMap<String, Package> {
    let workspace = read(Path::new("Cargo.toml"));
    let members = workspace
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("the root Cargo.toml lists its members")
        .0;
    let mut out = BTreeMap::new();
    for member in members.split(',').map(|m| m.trim().trim_matches('"')) {
        if member.is_empty() {
            continue;
        }
        let dir = root().join(member);
        let manifest = fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{member}/Cargo.toml: {e}"));
        let name = manifest
            .split_once("[package]")
            .and_then(|(_, p)| p.lines().find_map(|l| l.strip_prefix("name = ")))
            .map(|n| n.trim().trim_matches('"').to_string())
            .unwrap_or_else(|| panic!("{member}/Cargo.toml has no package name"));
        out.insert(name, Package { dir, manifest });
    }
    out
}

fn word(token: &str) -> &str {
    token.trim_matches(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
}

#[test]
fn cargo_commands_name_real_packages_and_targets() {
    let packages = packages();
    let mut problems = Vec::new();
    let mut seen = 0;
    for page in pages() {
        for (n, line) in read(&page).lines().enumerate() {
            let tokens: Vec<&str> = line.split_whitespace().collect();
            for start in tokens
                .iter()
                .enumerate()
                .filter(|(_, t)| word(t) == "cargo")
                .map(|(i, _)| i)
            {
                // The cargo flags of this command: up to `--`, a pipe, the next command
                // or the end of the inline code span it is written in.
                let mut flags = Vec::new();
                for t in &tokens[start + 1..] {
                    if matches!(*t, "--" | "|" | "&&" | ";" | "#") || word(t) == "cargo" {
                        break;
                    }
                    flags.push(*t);
                    if t.trim_end_matches([',', '.', ')', ';', ':']).ends_with('`') {
                        break;
                    }
                }
                let mut package = None;
                let mut wanted = Vec::new();
                for pair in flags.windows(2) {
                    let value = word(pair[1]);
                    match pair[0] {
                        "-p" | "--package" => package = Some(value),
                        "--example" => wanted.push(("example", "examples", value)),
                        "--test" => wanted.push(("test", "tests", value)),
                        "--bench" => wanted.push(("bench", "benches", value)),
                        _ => {}
                    }
                }
                let Some(p) = package else { continue };
                if p.is_empty() || p.starts_with('<') {
                    continue;
                }
                seen += 1;
                let at = format!("{}:{}", page.display(), n + 1);
                match packages.get(p) {
                    None => problems.push(format!("{at}: no workspace package {p}")),
                    Some(pkg) => {
                        for (kind, folder, name) in wanted {
                            if !pkg.has_target(kind, folder, name) {
                                problems.push(format!("{at}: package {p} has no {kind} {name}"));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        seen > 20,
        "only {seen} cargo commands found: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every file under `dir` with one of `exts`, skipping build output.
fn sources(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            if name != "target" && name != ".git" {
                sources(&p, exts, out);
            }
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| exts.contains(&x))
        {
            out.push(p);
        }
    }
}

#[test]
fn environment_variables_the_docs_name_exist_in_the_code() {
    let mut files = Vec::new();
    sources(&root(), &["rs", "py", "sh"], &mut files);
    let code: String = files
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let mut problems = BTreeSet::new();
    for page in pages() {
        let text = read(&page);
        for (i, _) in text.match_indices("OPAL_") {
            if i > 0 && text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            let var = &rest[..end];
            if !code.contains(var) {
                problems.insert(format!(
                    "{}: {var} appears in no source file",
                    page.display()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}",
        problems.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn readme_keeps_the_two_commands_ci_runs() {
    let readme = read(Path::new("README.md"));
    for command in [
        "cargo run --release -p opal-demo",
        "cargo test --workspace --locked",
    ] {
        assert!(
            readme.lines().any(|l| l.starts_with(command)),
            "README.md lost the command `{command}`"
        );
    }
    let ci = read(Path::new(".ci/run"));
    assert!(
        ci.lines()
            .any(|l| l.trim() == "cargo test --workspace --locked"),
        ".ci/run no longer runs README's test command"
    );
}

#[test]
fn prose_is_not_numbered_by_development_step() {
    let mut problems = Vec::new();
    for page in pages() {
        for (n, line) in read(&page).lines().enumerate() {
            let lower = line.to_lowercase();
            for marker in ["session", "issue"] {
                for (i, _) in lower.match_indices(marker) {
                    let after = lower[i + marker.len()..].trim_start_matches('s');
                    if after
                        .strip_prefix(' ')
                        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
                    {
                        problems.push(format!("{}:{}: {}", page.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
