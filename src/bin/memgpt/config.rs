//! `memgpt config`: every setting with where it came from, and for `provider` and `embedder`
//! what will actually run (resolved as `memgpt chat` resolves them, without loading a model
//! or calling an endpoint).

use std::time::Duration;

use anyhow::Result;

use crate::choices::ProviderPlan;
use crate::embedders::WhenMissing;
use crate::open;
use crate::provider::ProviderKind;
use crate::settings::Settings;

/// How long `memgpt config` waits for the store to say which model its vectors come from.
const STORE_WAIT: Duration = Duration::from_secs(5);

/// Prints the settings, with the provider and the embedder resolved.
pub async fn run(settings: &Settings) -> Result<()> {
    print!("{}", settings.render_with(&resolved(settings).await));
    Ok(())
}

/// What `provider` and `embedder` resolve to, as `(setting, description)`: an error is shown
/// in place of the value (the settings are printed whatever is wrong with them).
async fn resolved(settings: &Settings) -> Vec<(&'static str, String)> {
    let plan = ProviderPlan::resolve(settings);
    // `auto` follows the model of the store's vectors: read without taking the store (and
    // without waiting long for a database that does not answer).
    let read = async {
        let storage = open::reader(settings).await?;
        open::stored_space(&storage).await
    };
    let (stored, unread) = match tokio::time::timeout(STORE_WAIT, read).await {
        Ok(Ok(stored)) => (stored, None),
        Ok(Err(e)) => (None, Some(format!("{e:#}"))),
        Err(_) => (
            None,
            Some(format!("no answer within {} s", STORE_WAIT.as_secs())),
        ),
    };
    let when_missing = match plan.as_ref().map(ProviderPlan::kind) {
        Ok(ProviderKind::Local) => WhenMissing::Pull,
        _ => WhenMissing::GoWithout,
    };
    let provider = match &plan {
        Ok(plan) => plan.describe(),
        Err(e) => format!("(cannot run: {e:#})"),
    };
    let mut embedder = match crate::embedders::plan(settings, stored.as_ref(), when_missing) {
        Ok(plan) => {
            let mut line = plan.describe();
            if let (Some(space), Some(model)) = (&stored, plan.model())
                && !space.model.eq_ignore_ascii_case(model)
            {
                line.push_str(&format!(
                    "; refused: the store's vectors come from {} (`memgpt reindex` to switch)",
                    space.model
                ));
            }
            line
        }
        Err(e) => format!("(cannot run: {e:#})"),
    };
    if let Some(e) = unread {
        // The error names the store's URL: not its password.
        let url = settings.store_url();
        let e = e.replace(&url, &crate::settings::without_password(&url));
        embedder.push_str(&format!(" [the store could not be read: {e}]"));
    }
    vec![("provider", provider), ("embedder", embedder)]
}
