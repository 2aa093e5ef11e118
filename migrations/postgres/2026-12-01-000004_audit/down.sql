DROP TABLE ax_audit;
