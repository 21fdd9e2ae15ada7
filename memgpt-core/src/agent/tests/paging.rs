//! Memory pressure: the warning, flushes, failed summaries, context overflows, oversize messages.

use super::*;

#[tokio::test]
async fn the_warning_fires_once_and_a_flush_summarises() {
    let llm = llm();
    let mut agent = small_agent(&llm, 900).await;
    let mut warnings = Vec::new();
    let mut flush_step = None;
    for i in 0..40 {
        llm.push_call(
            "send_message",
            json!({"message": format!("reply number {i} with some padding words")}),
        );
        llm.push_summary(Ok(format!(
            "Summary after step {i}: we exchanged numbered messages."
        )));
        let record = agent
            .step(format!("message {i}: the secret word is word{i}"))
            .await
            .unwrap();
        assert_eq!(record.stop_reason, StopReason::EndTurn);
        if record.pressure_warning {
            warnings.push(i);
        }
        if !record.flushes.is_empty() {
            flush_step = Some((i, record));
            break;
        }
    }
    let (flushed_at, record) = flush_step.expect("the queue flushed");
    assert_eq!(
        warnings.len(),
        1,
        "one warning before the flush, not one per message: {warnings:?}"
    );
    assert!(warnings[0] < flushed_at);
    let flush = &record.flushes[0];
    assert!(!flush.forced && flush.summary_updated);
    assert!(flush.tokens_after < flush.tokens_before);
    assert!(flush.evicted_messages > 0 && flush.evicted_tokens > 0);

    // The summary heads the queue and counts the evicted messages.
    let summary = agent.summary().clone();
    assert!(summary.text.starts_with("Summary after step"));
    assert_eq!(summary.evicted_messages, flush.evicted_messages as u64);
    let prompt = agent.prompt();
    assert!(prompt[1].content.contains(&format!(
        "Summary of the {} earlier messages",
        flush.evicted_messages
    )));
    assert!(
        !prompt
            .iter()
            .any(|m| m.content.contains("the secret word is word0"))
    );
    // The summarizer saw the evicted messages and no functions.
    let summary_request = &llm.summary_requests()[0];
    assert!(summary_request.tools.is_empty());
    assert!(
        summary_request.messages[1]
            .content
            .contains("the secret word is word0")
    );
    // Evicted messages remain in recall storage.
    let found = agent
        .storage()
        .recall
        .search(agent.id(), &RecallQuery::text("word0", Page::first(5)))
        .await
        .unwrap();
    assert!(
        found.hits[0].item.text.contains("the secret word is word0"),
        "{found:?}"
    );
    // The queue never starts with a function result.
    let first = agent.context().queue().get(0).unwrap().message().kind;
    assert!(!matches!(
        first,
        MessageKind::FunctionReturn | MessageKind::FunctionError
    ));
    // The warning message itself was a system alert the model saw.
    let alerts = agent
        .storage()
        .recall
        .search(
            agent.id(),
            &RecallQuery {
                text: Some("memory pressure".into()),
                ..RecallQuery::kinds([MessageKind::SystemAlert], Page::first(5))
            },
        )
        .await
        .unwrap();
    assert_eq!(alerts.total, 1);
}

#[tokio::test]
async fn a_failed_summary_keeps_the_old_one_and_loses_no_message() {
    for empty in [false, true] {
        a_failed_or_empty_summary_keeps_the_old_one(empty).await;
    }
}

/// The summariser fails (or, `empty`, returns only whitespace) at the first flush.
async fn a_failed_or_empty_summary_keeps_the_old_one(empty: bool) {
    let llm = llm();
    let mut agent = small_agent(&llm, 700).await;
    let mut flushed = false;
    for i in 0..40 {
        llm.push_call("send_message", json!({"message": format!("reply {i}")}));
        llm.push_summary(if empty {
            Ok("  \n ".to_owned())
        } else {
            Err(LlmError::Transient {
                status: Some(500),
                message: "down".into(),
                retry_after: None,
            })
        });
        let record = agent
            .step(format!(
                "message {i} padded with several extra words to fill context"
            ))
            .await
            .unwrap();
        if let Some(flush) = record.flushes.first() {
            assert!(!flush.summary_updated);
            flushed = true;
            break;
        }
    }
    assert!(flushed);
    assert_eq!(agent.summary().text, "");
    assert!(agent.summary().evicted_messages > 0);
    let total = agent
        .storage()
        .recall
        .count_messages(agent.id())
        .await
        .unwrap();
    assert!(total as usize > agent.context().queue().len());
    let all = agent
        .storage()
        .recall
        .search(agent.id(), &RecallQuery::kinds([], Page::first(1000)))
        .await
        .unwrap();
    assert_eq!(all.total as u64, total);
}

#[tokio::test]
async fn a_context_overflow_forces_a_flush_and_one_retry() {
    let llm = llm();
    let mut agent = small_agent(&llm, 100_000).await;
    for i in 0..6 {
        llm.push_call("send_message", json!({"message": format!("reply {i}")}));
        agent.step(format!("filler {i}")).await.unwrap();
    }
    llm.push_error(LlmError::ContextOverflow {
        message: "maximum context length is 4096".into(),
    });
    llm.push_call("send_message", json!({"message": "after the flush"}));
    llm.push_summary(Ok("Earlier: filler.".into()));
    let record = agent.step("one more").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 2);
    assert_eq!(record.flushes.len(), 1);
    assert!(record.flushes[0].forced);
    assert_eq!(agent.summary().text, "Earlier: filler.");

    // A second overflow in the same step is not retried again.
    llm.push_error(LlmError::ContextOverflow {
        message: "still too long".into(),
    });
    llm.push_error(LlmError::ContextOverflow {
        message: "still too long".into(),
    });
    llm.push_summary(Ok("Earlier: more filler.".into()));
    let record = agent.step("and again").await.unwrap();
    assert!(matches!(
        record.stop_reason,
        StopReason::ProviderError {
            retryable: false,
            ..
        }
    ));
    assert_eq!(record.llm_calls, 2);
}

#[tokio::test]
async fn an_oversize_message_is_refused_before_anything_is_stored() {
    let llm = llm();
    let mut agent = small_agent(&llm, 1000).await;
    let err = agent.step("word ".repeat(2000)).await.unwrap_err();
    assert!(matches!(err, Error::MessageTooLarge { .. }), "{err}");
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        0
    );
    assert_eq!(agent.version(), 0);
    assert!(llm.requests().is_empty());
}
