//! How a topic and a record name become a registry subject.

/// The naming convention that picks the subject a record is registered under (Confluent's
/// `subject.name.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SubjectStrategy {
    /// `{topic}-value`: one schema lineage per topic.
    #[default]
    TopicName,
    /// `{record}`: the record's fully qualified name, whatever topic carries it.
    RecordName,
    /// `{topic}-{record}`: one lineage per record type per topic.
    TopicRecordName,
}

impl SubjectStrategy {
    /// The subject for a value of record type `record` published to `topic`.
    #[must_use]
    pub fn subject(self, topic: &str, record: &str) -> String {
        match self {
            Self::TopicName => format!("{topic}-value"),
            Self::RecordName => record.to_owned(),
            Self::TopicRecordName => format!("{topic}-{record}"),
        }
    }

    /// The name the `AsyncAPI` message binding gives this strategy.
    #[cfg_attr(not(feature = "asyncapi"), allow(dead_code))]
    pub(crate) fn binding_name(self) -> &'static str {
        match self {
            Self::TopicName => "TopicNameStrategy",
            Self::RecordName => "RecordNameStrategy",
            Self::TopicRecordName => "TopicRecordNameStrategy",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SubjectStrategy;

    #[test]
    fn each_strategy_names_the_subject_its_own_way() {
        assert_eq!(SubjectStrategy::default(), SubjectStrategy::TopicName);
        let pick = |s: SubjectStrategy| s.subject("shipments", "acme.Parcel");
        assert_eq!(pick(SubjectStrategy::TopicName), "shipments-value");
        assert_eq!(pick(SubjectStrategy::RecordName), "acme.Parcel");
        assert_eq!(
            pick(SubjectStrategy::TopicRecordName),
            "shipments-acme.Parcel"
        );
        assert_eq!(
            SubjectStrategy::TopicRecordName.binding_name(),
            "TopicRecordNameStrategy"
        );
    }
}
