//! Config as users write it: bounds on documents, the Istio corpus, what is reported as not applied.

mod bounds;
mod corpus;
mod not_applied;
mod realworld;
