ALTER TABLE ax_task DROP COLUMN labels;
