//! Job and record lifecycles. The string forms are stored in the database and shown in the API,
//! so they never change once released.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a job is in its lifecycle.
///
/// `queued` → `running` → `completed` | `failed`; `cancel` moves a live job to `cancelling`,
/// then `cancelled` once no record of it is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Accepted; no record has been claimed yet.
    Queued,
    /// At least one record has been claimed.
    Running,
    /// Every record reached a final state (some may have failed; see the counts).
    Completed,
    /// Stopped early, for example because the error rate crossed `shutdown_error_rate`.
    Failed,
    /// Cancel requested; records in flight are finishing.
    Cancelling,
    /// Cancelled; records that had not run are `cancelled`.
    Cancelled,
}

impl JobStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [Self; 6] = [
        Self::Queued,
        Self::Running,
        Self::Cancelling,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The stored and displayed form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelling => "cancelling",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => Self::Queued,
            "running" => Self::Running,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelling" => Self::Cancelling,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// A terminal job never changes status again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// Where a record is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordStatus {
    /// Waiting to be claimed by a worker.
    Pending,
    /// Claimed by a worker under a lease.
    InProgress,
    /// Generated; its values are stored.
    Completed,
    /// Generation failed; the error code, message and column are stored.
    Failed,
    /// Never ran because its job was cancelled or stopped.
    Cancelled,
}

impl RecordStatus {
    /// The stored and displayed form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "in_progress" => Self::InProgress,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// A terminal record is never claimed again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_forms_round_trip() {
        for s in [
            JobStatus::Queued,
            JobStatus::Running,
            JobStatus::Completed,
            JobStatus::Failed,
            JobStatus::Cancelling,
            JobStatus::Cancelled,
        ] {
            assert_eq!(JobStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for s in [
            RecordStatus::Pending,
            RecordStatus::InProgress,
            RecordStatus::Completed,
            RecordStatus::Failed,
            RecordStatus::Cancelled,
        ] {
            assert_eq!(RecordStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
