DROP TABLE ax_lease;
