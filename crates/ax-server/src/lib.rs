//! ax's process: the actors that fire, lock, store and send runs, the service the API and the
//! console share, the HTTP API and the console.

pub mod actors;
pub mod api;
pub mod app;
pub mod cluster;
pub mod config;
pub mod console;
pub mod error;
pub mod notify;
pub mod service;
pub mod web;
