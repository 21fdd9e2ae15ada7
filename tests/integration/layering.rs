//! The layering invariants of ARCHITECTURE.md, checked on the sources: inside each library
//! crate no module imports from a module that imports it (top-level modules form no cycle,
//! and no two files import each other), and nothing in `memgpt-core` imports from `agent` or
//! the crate root except `agent` itself.
//!
//! An import is a `crate::` or `super::` path in code, or a path through a child module
//! (`builder::main_context` in `agent`), comments and `#[cfg(test)] mod tests` skipped. A parent
//! declaring or re-exporting its children (`mod x; pub use x::Y;`) is not an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Exported macros live at the crate root by Rust's rules: naming them is not importing from
/// the root.
const MACROS: &[&str] = &["crate::memgpt_fn", "crate::register_policy"];

/// Every module of a crate, by path, with its source (tests and comments removed).
fn modules(src: &Path) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut module: Module = rel
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                    module.pop();
                }
                out.insert(module, code_of(&std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out
}

fn code_of(source: &str) -> String {
    let source = source
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or(source);
    source
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `module`'s code imports from.
fn imports(module: &Module, code: &str, all: &BTreeMap<Module, String>) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    for (start, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        let before = code[..start].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '$')) {
            // `memgpt_core::...`, the second `super::` of `super::super::`, or a macro's
            // `$crate::` (resolved where the macro is used).
            continue;
        }
        let tail: String = code[start..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        if MACROS.contains(&tail.trim_end_matches(':')) {
            continue;
        }
        let mut segments: Vec<&str> = tail.split("::").filter(|s| !s.is_empty()).collect();
        let mut path: Module = if segments.first() == Some(&"crate") {
            segments.remove(0);
            Vec::new()
        } else {
            let mut base = module.clone();
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop();
            }
            base
        };
        path.extend(segments.iter().map(|s| s.to_string()));
        // The longest prefix that is a module.
        while !all.contains_key(&path) {
            if path.pop().is_none() {
                break;
            }
        }
        if &path != module {
            out.insert(path);
        }
    }
    // Paths through a child module (`builder::main_context`), outside the lines that declare or
    // re-export children.
    let children = all
        .keys()
        .filter(|m| m.len() == module.len() + 1 && m.starts_with(module));
    let used: String = code
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !(l.starts_with("mod ")
                || l.starts_with("pub mod ")
                || l.starts_with("pub use ")
                || l.starts_with("pub(crate) use ")
                || l.starts_with("pub(super) use "))
        })
        .collect::<Vec<_>>()
        .join("\n");
    for child in children {
        let Some(name) = child.last() else { continue };
        let path = format!("{name}::");
        let through = used.match_indices(&path).any(|(start, _)| {
            let before = used[..start].chars().last();
            !before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '$'))
        });
        if through {
            out.insert(child.clone());
        }
    }
    out
}

fn graph(krate: &str) -> BTreeMap<Module, BTreeSet<Module>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(krate)
        .join("src");
    let all = modules(&src);
    all.iter()
        .map(|(m, code)| (m.clone(), imports(m, code, &all)))
        .collect()
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "<root>".into()
    } else {
        m.join("::")
    }
}

fn top_level_cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in graph {
        let from = from.first().cloned().unwrap_or_default();
        for to in tos {
            let to = to.first().cloned().unwrap_or_default();
            if from != to {
                top.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // A module is on a cycle if it reaches itself.
    let mut cycles = Vec::new();
    for start in top.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = top[start].iter().collect();
        while let Some(m) = stack.pop() {
            if m == start {
                cycles.push(start.clone());
                break;
            }
            if seen.insert(m.clone()) {
                stack.extend(top.get(m).into_iter().flatten());
            }
        }
    }
    cycles
}

#[memgpt_test_harness::test]
fn no_module_imports_from_a_module_that_imports_it() {
    let mut problems = Vec::new();
    for krate in [
        "memgpt-core",
        "memgpt-backends",
        "memgpt-providers",
        "memgpt-server",
    ] {
        let graph = graph(krate);
        for (a, tos) in &graph {
            for b in tos {
                if a < b && graph.get(b).is_some_and(|back| back.contains(a)) {
                    problems.push(format!("{krate}: {} <-> {}", name(a), name(b)));
                }
            }
        }
        for m in top_level_cycles(&graph) {
            problems.push(format!(
                "{krate}: top-level module `{m}` is on an import cycle"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles:\n{}",
        problems.join("\n")
    );
}

#[memgpt_test_harness::test]
fn nothing_in_core_imports_from_the_agent_or_the_crate_root() {
    let graph = graph("memgpt-core");
    let offenders: Vec<String> = graph
        .iter()
        .filter(|(from, _)| from.first().map(String::as_str) != Some("agent") && !from.is_empty())
        .flat_map(|(from, tos)| {
            tos.iter()
                .filter(|to| to.is_empty() || to.first().map(String::as_str) == Some("agent"))
                .map(move |to| format!("{} imports {}", name(from), name(to)))
        })
        .collect();
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
}

#[memgpt_test_harness::test]
fn the_checker_sees_imports() {
    // Guard against a checker that finds nothing: the agent imports the store, and the
    // SQLite recall module its dialect.
    let core = graph("memgpt-core");
    assert!(core[&vec!["agent".to_owned()]].contains(&vec!["store".to_owned()]));
    let backends = graph("memgpt-backends");
    let recall = vec!["sqlite".to_owned(), "recall".to_owned()];
    assert!(backends[&recall].contains(&vec!["sqlite".to_owned(), "dialect".to_owned()]));
    // A path through a child counts; declaring and re-exporting it does not.
    let all: BTreeMap<Module, String> =
        [vec!["a".to_owned()], vec!["a".to_owned(), "b".to_owned()]]
            .into_iter()
            .map(|m| (m, String::new()))
            .collect();
    let parent = vec!["a".to_owned()];
    let child = vec!["a".to_owned(), "b".to_owned()];
    assert!(imports(&parent, "fn f() { b::g(); }", &all).contains(&child));
    assert!(imports(&parent, "use b::g;", &all).contains(&child));
    assert!(imports(&parent, "mod b;\npub use b::G;\npub(crate) use b::h;", &all).is_empty());
    assert!(imports(&parent, "fn f() { ab::g(); x_b::h(); }", &all).is_empty());
}

/// Every source file of the crates says what it is for in a `//!` module doc (the tidy rule of
/// rust-analyzer's `tidy.rs`).
#[memgpt_test_harness::test]
fn every_source_file_has_a_module_doc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let mut pending: Vec<std::path::PathBuf> = [
        "src",
        "memgpt-core/src",
        "memgpt-backends/src",
        "memgpt-providers/src",
        "memgpt-server/src",
        "memgpt-mcp/src",
        "memgpt-macros/src",
    ]
    .iter()
    .map(|dir| root.join(dir))
    .collect();
    let mut files = 0;
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                let first = text
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or_default();
                if !first.starts_with("//!") {
                    missing.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
    }
    assert!(files > 100, "{files} files seen");
    assert!(
        missing.is_empty(),
        "files without a `//!` module doc:\n{}",
        missing.join("\n")
    );
}
