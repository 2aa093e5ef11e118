DROP TABLE ax_attempt;
