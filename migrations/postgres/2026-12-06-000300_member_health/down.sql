DROP TABLE ax_member_gone;
DROP TABLE ax_member_health;
