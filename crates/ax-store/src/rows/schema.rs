//! Table definitions shared by every backend: only portable column types are used, and
//! times are UTC `Timestamp`s (MySQL `DATETIME(3)`, SQLite text).

diesel::table! {
    ax_task (id) {
        id -> BigInt,
        name -> Text,
        scene -> Text,
        cron -> Text,
        handler_url -> Text,
        params -> Text,
        max_retry -> Integer,
        timeout_ms -> BigInt,
        status -> Text,
        next_run_at -> Nullable<Timestamp>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        retry_backoff_secs -> Nullable<Integer>,
        retry_factor -> Nullable<Integer>,
        misfire_threshold_secs -> Nullable<Integer>,
        dependency_timeout_secs -> Nullable<Integer>,
        time_zone -> Text,
        overlap -> Text,
        jitter_secs -> Integer,
        version -> BigInt,
        labels -> Text,
        executor -> Nullable<Text>,
        alerts -> Nullable<Text>,
        alert_lag_ms -> Nullable<BigInt>,
        paused_at -> Nullable<Timestamp>,
        paused_by -> Nullable<Text>,
        calendars -> Nullable<Text>,
    }
}

diesel::table! {
    ax_instance (id) {
        id -> BigInt,
        task_id -> BigInt,
        request_id -> Text,
        trigger_type -> Text,
        scheduled_at -> Timestamp,
        trigger_at -> Timestamp,
        status -> Text,
        attempt -> Integer,
        retry_count -> Integer,
        callback_code -> Nullable<Text>,
        callback_message -> Nullable<Text>,
        deadline_at -> Nullable<Timestamp>,
        fired_by -> Text,
        created_at -> Timestamp,
        finished_at -> Nullable<Timestamp>,
        next_attempt_at -> Nullable<Timestamp>,
        params -> Nullable<Text>,
        dispatched_attempt -> Integer,
        claimed_until -> Nullable<Timestamp>,
        dispatched_at -> Nullable<Timestamp>,
        member -> Nullable<Text>,
        shard_index -> Nullable<Integer>,
        shard_total -> Nullable<Integer>,
    }
}

diesel::table! {
    ax_task_dependency (task_id, depends_on) {
        task_id -> BigInt,
        depends_on -> BigInt,
    }
}

diesel::table! {
    ax_meta (name) {
        name -> Text,
        value -> Text,
    }
}

diesel::table! {
    ax_audit (id) {
        id -> BigInt,
        at -> Timestamp,
        actor -> Text,
        action -> Text,
        target -> Text,
        summary -> Text,
    }
}

diesel::table! {
    ax_attempt (id) {
        id -> BigInt,
        request_id -> Text,
        attempt -> Integer,
        ended_at -> Timestamp,
        code -> Nullable<Text>,
        message -> Nullable<Text>,
        process -> Text,
        member -> Nullable<Text>,
    }
}

diesel::table! {
    ax_session (id) {
        id -> Text,
        token_name -> Text,
        created_at -> Timestamp,
        expires_at -> Timestamp,
        token_digest -> Text,
    }
}

diesel::table! {
    ax_scene (scene) {
        scene -> Text,
        paused_at -> Nullable<Timestamp>,
        alerts -> Nullable<Text>,
        paused_by -> Nullable<Text>,
    }
}

diesel::table! {
    ax_calendar (name) {
        name -> Text,
        days -> Text,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    ax_executor_group (name) {
        name -> Text,
        routing -> Text,
        max_in_flight -> Integer,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    ax_executor_member (group_name, url) {
        group_name -> Text,
        url -> Text,
        position -> BigInt,
        capacity -> Nullable<Integer>,
        registered_at -> Timestamp,
        last_seen_at -> Nullable<Timestamp>,
        registered_by -> Nullable<Text>,
    }
}

diesel::table! {
    ax_member_health (url) {
        url -> Text,
        unhealthy_until -> Nullable<Timestamp>,
        last_failure_at -> Nullable<Timestamp>,
        last_error -> Nullable<Text>,
        changed_at -> Timestamp,
    }
}

diesel::table! {
    ax_member_gone (group_name, url) {
        group_name -> Text,
        url -> Text,
        gone_at -> Timestamp,
        reason -> Text,
    }
}

diesel::table! {
    ax_task_change (id) {
        id -> BigInt,
        task_id -> BigInt,
        at -> Timestamp,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    ax_task,
    ax_instance,
    ax_task_dependency,
    ax_run_log_attempt
);

diesel::table! {
    ax_alert_state (id) {
        id -> Integer,
        enabled -> Integer,
        folded_by -> Nullable<Text>,
        folded_at -> Nullable<Timestamp>,
        watch_version -> BigInt,
    }
}

diesel::table! {
    ax_alert_event (id) {
        id -> BigInt,
        request_id -> Text,
        task_id -> BigInt,
        status -> Text,
        code -> Nullable<Text>,
        message -> Nullable<Text>,
        at -> Timestamp,
        subject -> Nullable<Text>,
        event -> Nullable<Text>,
        lag_ms -> Nullable<BigInt>,
    }
}

diesel::table! {
    ax_alert_fold (subject, event) {
        subject -> Text,
        event -> Text,
        window_start -> Nullable<Timestamp>,
        window_count -> Integer,
        silent_until -> Nullable<Timestamp>,
        folded -> Integer,
        folded_since -> Nullable<Timestamp>,
        alerted -> Integer,
    }
}

diesel::table! {
    ax_alert (id, channel) {
        id -> Text,
        channel -> Text,
        event -> Text,
        subject -> Text,
        task_id -> Nullable<BigInt>,
        scene -> Nullable<Text>,
        request_id -> Nullable<Text>,
        code -> Nullable<Text>,
        message -> Nullable<Text>,
        count -> Integer,
        folded -> Integer,
        folded_since -> Nullable<Timestamp>,
        at -> Timestamp,
        status -> Text,
        tries -> Integer,
        next_try_at -> Nullable<Timestamp>,
        claimant -> Nullable<Text>,
        claimed_until -> Nullable<Timestamp>,
        sent_at -> Nullable<Timestamp>,
        last_error -> Nullable<Text>,
        created_at -> Timestamp,
    }
}

diesel::table! {
    ax_run_log (id) {
        id -> BigInt,
        request_id -> Text,
        attempt -> Integer,
        at -> Timestamp,
        text -> Text,
        bytes -> Integer,
    }
}

diesel::table! {
    ax_run_log_attempt (request_id, attempt) {
        request_id -> Text,
        attempt -> Integer,
        progress -> Nullable<Integer>,
        line_count -> Integer,
        byte_count -> BigInt,
        dropped -> BigInt,
        output -> Nullable<Text>,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    ax_process (instance_id) {
        instance_id -> Text,
        epoch -> BigInt,
        sent_through -> BigInt,
        renewed_at -> Timestamp,
        fenced_at -> Nullable<Timestamp>,
    }
}
