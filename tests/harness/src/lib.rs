//! The test harness of memgpt-rs's integration test binaries (`tests/integration`,
//! `memgpt-backends/tests/conformance`), on libtest-mimic: the same command line and report as
//! libtest's, plus one thing libtest cannot do, **a test that cannot run here is reported as
//! ignored, with its reason**, instead of passing after printing "skipped" into captured output.
//!
//! * `#[memgpt_test_harness::test]` registers a test (sync or async; async ones take
//!   `flavor = "multi_thread", worker_threads = N` like `tokio::test`).
//! * [`skip`] ends a test that needs what this machine lacks (PostgreSQL, the offline models,
//!   Chromium, the Python tools...): the summary line counts it as ignored and the listing says
//!   why. Under `CI=true` it fails instead: CI provides everything, so a missing part there is
//!   a broken CI, not a skip.
//! * A binary's `main` is [`main`] (or [`main_with`], adding trials built at run time).
//!
//! ```text
//! test server::persistence::two_servers_share_tenants ... ignored, needs PostgreSQL: set MEMGPT_TEST_POSTGRES_URL (.ci/postgres.sh start)
//! test result: ok. 128 passed; 0 failed; 6 ignored; 0 measured; 0 filtered out
//! ```

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Once;

pub use libtest_mimic::Trial;
use libtest_mimic::{Arguments, Completion, Failed};
pub use memgpt_test_harness_macros::test;

/// What the generated code uses; not an API.
#[doc(hidden)]
pub mod __private {
    pub use linkme;

    /// A test's return value as the harness reads it.
    pub fn outcome<E: std::fmt::Debug>(result: Result<(), E>) -> Result<(), String> {
        result.map_err(|e| format!("the test returned an error: {e:?}"))
    }
}

/// A boxed test future.
pub type TestFuture = Pin<Box<dyn Future<Output = Result<(), String>>>>;

/// The runtime an async test runs on.
#[derive(Clone, Copy, Debug)]
pub enum Runtime {
    /// One thread (`tokio::test`'s default).
    CurrentThread,
    /// This many worker threads.
    MultiThread(usize),
}

/// How to run a test.
#[derive(Clone, Copy, Debug)]
pub enum Run {
    /// A plain function.
    Sync(fn() -> Result<(), String>),
    /// An async function on a fresh runtime.
    Async(Runtime, fn() -> TestFuture),
}

/// A registered test.
#[derive(Debug)]
pub struct Case {
    /// `module_path!()` where it is defined.
    pub module: &'static str,
    /// Its function's name.
    pub name: &'static str,
    /// How to run it.
    pub run: Run,
}

/// Every test `#[memgpt_test_harness::test]` registered in this binary.
#[linkme::distributed_slice]
pub static CASES: [Case];

/// The payload of a test that ended with [`skip`].
struct Skipped(String);

/// Ends the running test as ignored because `reason` (what it needs, and how to provide it):
/// the report lists it as ignored with the reason. Under `CI=true` the test fails instead.
pub fn skip(reason: impl Into<String>) -> ! {
    let reason = reason.into();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true, where every test runs, but this one {reason}");
    }
    std::panic::panic_any(Skipped(reason))
}

/// The trial of `name` run by `run`.
pub fn trial(name: impl Into<String>, run: Run) -> Trial {
    Trial::ignorable_test(name, move || {
        execute(|| match run {
            Run::Sync(test) => test(),
            Run::Async(flavor, test) => block_on(flavor, test()),
        })
    })
}

/// A trial built at run time: `test` makes the future run on a fresh `runtime` (a conformance
/// case of one store, say).
pub fn async_trial(
    name: impl Into<String>,
    runtime: Runtime,
    test: impl FnOnce() -> TestFuture + Send + 'static,
) -> Trial {
    Trial::ignorable_test(name, move || execute(|| block_on(runtime, test())))
}

/// Runs `future` on a fresh runtime of `flavor`.
fn block_on(flavor: Runtime, future: TestFuture) -> Result<(), String> {
    let runtime = match flavor {
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Runtime::MultiThread(workers) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .enable_all()
            .build(),
    };
    match runtime {
        Ok(runtime) => runtime.block_on(future),
        Err(e) => Err(format!("cannot start the test's runtime: {e}")),
    }
}

/// Runs a test, turning a [`skip`] into an ignored outcome and a panic into a failure.
fn execute(test: impl FnOnce() -> Result<(), String>) -> Result<Completion, Failed> {
    let result = std::panic::catch_unwind(AssertUnwindSafe(test));
    match result {
        Ok(Ok(())) => Ok(Completion::Completed),
        Ok(Err(message)) => Err(message.into()),
        Err(payload) => match payload.downcast::<Skipped>() {
            Ok(skipped) => Ok(Completion::Ignored {
                reason: Some(skipped.0),
            }),
            Err(payload) => Err(panic_message(&*payload).into()),
        },
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => format!("panicked: {s}"),
        (_, Some(s)) => format!("panicked: {s}"),
        _ => "panicked".to_owned(),
    }
}

/// A test's name as libtest would give it: its module path without the binary's crate name.
fn name_of(case: &Case) -> String {
    match case.module.split_once("::") {
        Some((_, module)) => format!("{module}::{}", case.name),
        None => case.name.to_owned(),
    }
}

/// Silences the panic of a skipped test (the report says it was ignored, and why).
fn quiet_skips() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Skipped>().is_none() {
                default(info);
            }
        }));
    });
}

/// Runs this binary's tests as libtest would (same arguments, same report) and exits.
pub fn main() -> ! {
    main_with(Vec::new())
}

/// [`main`], with `extra` trials built at run time.
pub fn main_with(extra: Vec<Trial>) -> ! {
    quiet_skips();
    let (args, filters) = split_filters(std::env::args());
    let arguments = Arguments::from_iter(args);
    let mut trials: Vec<Trial> = CASES
        .iter()
        .map(|case| trial(name_of(case), case.run))
        .chain(extra)
        .collect();
    if !filters.is_empty() {
        let matches = |name: &str, filter: &String| match arguments.exact {
            true => name == filter,
            false => name.contains(filter.as_str()),
        };
        trials.retain(|t| filters.iter().any(|f| matches(t.name(), f)));
    }
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    libtest_mimic::run(&arguments, trials).exit()
}

/// The options of libtest's command line that take a value (as the next argument, or after
/// `=`).
const OPTIONS_WITH_VALUES: &[&str] = &[
    "--test-threads",
    "--logfile",
    "--skip",
    "--color",
    "--format",
];

/// Splits a command line into what libtest-mimic parses and, when it names more than one
/// filter, the filters: libtest runs the tests that match any of them
/// (`cargo test -- server::retries server::timers`), libtest-mimic takes one. One filter stays
/// with libtest-mimic, which then also counts what it filtered out.
fn split_filters(args: impl IntoIterator<Item = String>) -> (Vec<String>, Vec<String>) {
    let mut kept = Vec::new();
    let mut filters = Vec::new();
    let mut args = args.into_iter();
    kept.extend(args.next());
    while let Some(arg) = args.next() {
        if OPTIONS_WITH_VALUES.contains(&arg.as_str()) {
            kept.push(arg);
            kept.extend(args.next());
        } else if arg.starts_with('-') {
            kept.push(arg);
        } else {
            filters.push(arg);
        }
    }
    if filters.len() == 1 {
        kept.append(&mut filters);
    }
    (kept, filters)
}

#[cfg(test)]
mod tests {
    use libtest_mimic::Completion;

    use super::{Case, Run, Runtime, TestFuture, block_on, execute, name_of, quiet_skips, skip};

    fn outcome(test: impl FnOnce() -> Result<(), String>) -> &'static str {
        quiet_skips();
        match execute(test) {
            Ok(Completion::Completed) => "passed",
            Ok(Completion::Ignored { reason: Some(r) }) if r == "needs a unicorn" => "ignored",
            Ok(Completion::Ignored { .. }) => "ignored without its reason",
            Err(_) => "failed",
        }
    }

    #[test]
    fn several_filters_are_split_off_as_libtest_takes_them() {
        let split = |line: &str| super::split_filters(line.split(' ').map(str::to_owned));
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            split("bin --exact a --test-threads 1 b --skip c --color=never"),
            (
                strings(&[
                    "bin",
                    "--exact",
                    "--test-threads",
                    "1",
                    "--skip",
                    "c",
                    "--color=never"
                ]),
                strings(&["a", "b"])
            )
        );
        assert_eq!(
            split("bin --skip c a --nocapture"),
            (strings(&["bin", "--skip", "c", "--nocapture", "a"]), vec![])
        );
        assert_eq!(split("bin"), (strings(&["bin"]), vec![]));
    }

    #[test]
    fn a_skip_is_ignored_with_its_reason_a_panic_or_an_error_fails() {
        // Outside CI a skip is an ignored test; the harness's own CI run sets CI=true, where it
        // is a failure instead.
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
        let skipped = outcome(|| skip("needs a unicorn"));
        assert_eq!(skipped, if in_ci { "failed" } else { "ignored" });
        assert_eq!(outcome(|| Ok(())), "passed");
        assert_eq!(outcome(|| Err("no".into())), "failed");
        assert_eq!(outcome(|| panic!("boom")), "failed");
        let future = || -> TestFuture { Box::pin(async { Ok(()) }) };
        assert_eq!(
            outcome(|| block_on(Runtime::MultiThread(2), future())),
            "passed"
        );
    }

    #[test]
    fn names_drop_the_binary_and_keep_the_module_path() {
        let case = Case {
            module: "integration::server::retries",
            name: "a_retry_is_one_request",
            run: Run::Sync(|| Ok(())),
        };
        assert_eq!(name_of(&case), "server::retries::a_retry_is_one_request");
        let top = Case {
            module: "integration",
            ..case
        };
        assert_eq!(name_of(&top), "a_retry_is_one_request");
    }
}
