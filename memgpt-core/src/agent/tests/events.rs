//! Timer and login events.

use super::*;

#[tokio::test]
async fn paused_timers_are_ignored() {
    let llm = llm();
    let start = Utc.with_ymd_and_hms(2025, 6, 1, 9, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .clock(clock.clone())
        .build()
        .await
        .unwrap();
    llm.push_calls(
        "",
        &[(
            "pause_heartbeats",
            json!({"minutes": 30, "request_heartbeat": false}),
        )],
    );
    let record = agent.step(Event::timer("hourly check-in")).await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(
        agent.timers_paused_until(),
        Some(start + Duration::minutes(30))
    );

    clock.advance(Duration::minutes(10));
    let calls = llm.requests().len();
    let record = agent.step(Event::timer("hourly check-in")).await.unwrap();
    assert_eq!(record.stop_reason, StopReason::TimersPaused);
    assert!(record.messages.is_empty());
    assert_eq!(llm.requests().len(), calls);

    clock.advance(Duration::minutes(25));
    llm.push_call("send_message", json!({"message": "checking in"}));
    let record = agent.step(Event::timer("hourly check-in")).await.unwrap();
    assert_eq!(record.replies, ["checking in"]);

    let bad = llm.requests().len();
    llm.push_call(
        "pause_heartbeats",
        json!({"minutes": 1000, "request_heartbeat": false}),
    );
    llm.push_call("send_message", json!({"message": "ok"}));
    let record = agent.step("pause a lot").await.unwrap();
    assert!(record.function_calls[0].output.contains("at most 360"));
    assert!(llm.requests().len() > bad);
}

#[tokio::test]
async fn logins_mention_the_previous_one() {
    let llm = llm();
    let start = Utc.with_ymd_and_hms(2025, 6, 1, 9, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .clock(clock.clone())
        .build()
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "welcome"}));
    let first = agent.step(Event::login()).await.unwrap();
    assert_eq!(
        first.messages[0].text,
        "The user logged in for the first time."
    );
    clock.advance(Duration::days(2));
    llm.push_call("send_message", json!({"message": "welcome back"}));
    let second = agent.step(Event::login()).await.unwrap();
    assert_eq!(
        second.messages[0].text,
        "The user logged in. Their previous login was at 2025-06-01T09:00:00Z."
    );
}
