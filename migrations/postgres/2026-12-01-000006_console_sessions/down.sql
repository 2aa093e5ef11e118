DROP TABLE ax_session;
