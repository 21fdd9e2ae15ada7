//! trybuild UI tests of `#[memgpt_fn]`: `pass` cases compile and run (their `main` asserts on
//! the registered schema), `fail` cases must fail with the error in their `.stderr` snapshot.
//!
//! Compiler output changes between Rust versions: after upgrading the toolchain, regenerate the
//! snapshots with `TRYBUILD=overwrite cargo test -p memgpt-macros --test ui` and review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
