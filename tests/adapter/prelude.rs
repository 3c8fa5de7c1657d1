//! Compile-time gate: the prelude carries exactly the names services use with
//! ruststream-rdkafka 0.7.1, the framework traits are implemented with the same associated
//! types, and handles have the auto traits the runtime relies on (moved across runtimes).

#![allow(dead_code, clippy::items_after_statements)]

use ruststream::runtime::PublishTransform;
use ruststream_kafka::context::{KafkaBatchContext, KafkaContext, keys};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{
    ClosedKafkaBroker, ConnectedKafkaBroker, EosPipeline, KafkaError, KafkaMessage, KafkaPublish,
    KafkaPublisher, KafkaSubscriber, KafkaTransactionalPublisher, TransactionalPartitions,
};

fn prelude_names() {
    let _: fn(Publish) -> Publish = |p| p;
    let _: fn(TransactionalPublish) = |_| {};
    let _: fn(PartitionedPublish) = |_| {};
    let _: fn(EosPublish) = |_| {};
    let _ = (Partition, Position, SeekHandle, Source, Topic);
    let _ = (
        Assignment::Range,
        Commit::Auto,
        EosReplies,
        KafkaOptions::default(),
        KafkaPosition::earliest(),
        LaneKey::Partition,
        StartOffset::Committed,
        ToSourceTopic,
    );
    let _: fn(KafkaBroker, KafkaTopic, KafkaTopics, KafkaPartitions, KafkaSeeker, RoundRobin) =
        |_, _, _, _, _, _| {};
    fn steps<T: KafkaPublishSteps>() {}
    fn lanes<T: PartitionLanes>() {}
    fn positioned<T: Positioned>() {}
    fn seeker<T: Seeker>() {}
    fn transactional<T: TransactionalPublisher>() {}
    lanes::<TransactionalPartitions>();
    positioned::<KafkaMessage>();
    seeker::<KafkaSeeker>();
    transactional::<KafkaTransactionalPublisher>();
    // `Publish::default()` is the crate's plain policy.
    let _: KafkaPublish = Publish::default();
}

fn send_sync_static<T: Send + Sync + 'static>() {}

fn auto_traits() {
    send_sync_static::<KafkaBroker>();
    send_sync_static::<ConnectedKafkaBroker>();
    send_sync_static::<ClosedKafkaBroker>();
    send_sync_static::<KafkaPublisher>();
    send_sync_static::<KafkaTransactionalPublisher>();
    send_sync_static::<TransactionalPartitions>();
    send_sync_static::<EosPipeline>();
    send_sync_static::<KafkaSeeker>();
    send_sync_static::<KafkaMessage>();
    send_sync_static::<KafkaError>();
    send_sync_static::<KafkaContext>();
    send_sync_static::<KafkaBatchContext>();
    fn send<T: Send>() {}
    send::<KafkaSubscriber>();
}

fn associated_types() {
    fn broker<B: ruststream::Broker<Error = KafkaError, Connected = ConnectedKafkaBroker>>() {}
    fn connected<C: ruststream::ConnectedBroker<Error = KafkaError, Closed = ClosedKafkaBroker>>() {
    }
    fn subscribe<
        S: ruststream::Subscribe<Subscriber = KafkaSubscriber, Copies = ruststream::AddressedCopies>,
    >() {
    }
    fn subscriber<S: ruststream::Subscriber<Message = KafkaMessage, Error = KafkaError>>() {}
    fn batches<S: ruststream::BatchSubscriber<Batch = Vec<KafkaMessage>>>() {}
    fn seekable<S: ruststream::Seekable<Seeker = KafkaSeeker>>() {}
    fn publisher<
        P: ruststream::Publisher<
                Payload = ruststream::Lend,
                Error = KafkaError,
                Options = KafkaOptions,
            >,
    >() {
    }
    fn default_publish<C: ruststream::DefaultPublish<Policy = KafkaPublish>>() {}
    fn source<
        S: ruststream::SubscriptionSource<ConnectedKafkaBroker, Subscriber = KafkaSubscriber>,
    >() {
    }
    fn field<
        K: ruststream::Field<KafkaContext> + ruststream::ContextField<Context = KafkaContext>,
    >() {
    }
    fn context<C: ruststream::BuildContext<KafkaMessage>>() {}
    fn batch_context<C: ruststream::BuildBatchContext<KafkaMessage>>() {}
    fn transform<T: PublishTransform<ruststream::runtime::ForReply<KafkaContext>, KafkaOptions>>() {
    }
    broker::<KafkaBroker>();
    connected::<ConnectedKafkaBroker>();
    subscribe::<ConnectedKafkaBroker>();
    subscriber::<KafkaSubscriber>();
    batches::<KafkaSubscriber>();
    seekable::<KafkaSubscriber>();
    publisher::<KafkaPublisher>();
    publisher::<KafkaTransactionalPublisher>();
    publisher::<EosPipeline>();
    default_publish::<ConnectedKafkaBroker>();
    source::<KafkaTopic>();
    source::<KafkaTopics>();
    source::<KafkaPartitions>();
    field::<keys::Topic>();
    field::<keys::Partition>();
    field::<keys::Offset>();
    field::<keys::TimestampMillis>();
    field::<keys::Key>();
    field::<keys::Source>();
    field::<keys::Position>();
    field::<keys::SeekHandle>();
    context::<KafkaContext>();
    batch_context::<KafkaBatchContext>();
    transform::<RoundRobin>();
    transform::<ToSourceTopic>();
    transform::<EosReplies>();
}

#[test]
fn the_public_surface_compiles() {
    prelude_names();
    auto_traits();
    associated_types();
}
