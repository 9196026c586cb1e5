//! Fuzz target `requests`: what an ADS client writes on a stream, read as axon reads it.
//!
//! Input: a mode byte (bit 0: a Delta stream), a chunk-size byte, then the request body.
//! - The body is pushed into a `RequestReader` (`FrameReader` reassembly, then the hand-written
//!   `SotwDecoder`, or prost and `delta_request` for Delta) in chunks of that size, taking
//!   every complete request after each chunk until the stream fails, as the ADS adapter does.
//! - The body is also decoded whole, unframed, as one message: `SotwDecoder::decode`
//!   against prost's `DiscoveryRequest` (when both accept it, they must agree on every string
//!   field and the names), and `delta_request` of prost's `DeltaDiscoveryRequest`.
#![no_main]

use axon_xds::decode::{RequestReader, SotwDecoder, delta_request};
use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let [mode, chunk, body @ ..] = data else {
        return;
    };
    let delta = mode & 1 != 0;
    let chunk = usize::from(*chunk % 64) + 1;

    let mut reader = RequestReader::new(delta);
    'stream: for piece in body.chunks(chunk) {
        reader.push(Bytes::copy_from_slice(piece));
        loop {
            match reader.next_request() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    let _ = e.to_string();
                    break 'stream;
                }
            }
        }
    }

    let whole = Bytes::copy_from_slice(body);
    let ours = SotwDecoder::default().decode(whole.clone());
    let prost = DiscoveryRequest::decode(whole.clone());
    if let (Ok(ours), Ok(theirs)) = (&ours, &prost) {
        assert_eq!(ours.version_info, theirs.version_info);
        assert_eq!(ours.type_url, theirs.type_url);
        assert_eq!(ours.response_nonce, theirs.response_nonce);
        assert_eq!(
            ours.resource_names.iter().collect::<Vec<_>>(),
            theirs.resource_names
        );
        assert_eq!(ours.node.is_some(), theirs.node.is_some());
        assert_eq!(ours.error_detail.is_some(), theirs.error_detail.is_some());
    }
    if let Ok(r) = DeltaDiscoveryRequest::decode(whole) {
        let _ = delta_request(r);
    }
});
