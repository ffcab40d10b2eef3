-- title: All orders (200k rows)
-- source: shop
-- sheet: Orders
-- count: true
-- Every order in the sample shop: a large export to watch progress on.
SELECT o.id, o.created_at, o.customer_id, o.product_id, o.quantity, o.unit_price, o.total,
       o.status, o.paid, o.note
FROM orders o
ORDER BY o.id;
