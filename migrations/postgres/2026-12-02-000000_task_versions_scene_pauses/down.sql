DROP TABLE ax_scene;
ALTER TABLE ax_task DROP COLUMN version;
